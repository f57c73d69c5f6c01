--[[
  claim-many-n.lua: a batch of claims in one call, each item applied exactly as claim-2.lua applies a single
  claim, in order (an item whose key appeared earlier in the batch sees that earlier item's record). One
  TIME for the whole batch: every item is judged at the same instant.

  KEYS[i]       record key of item i    <prefix>{<storage key>}, one per item, duplicates allowed (n items)
  KEYS[n+i]     steps key of item i     <prefix>{<storage key>}:s, one per item, after every record key
                                        (the steps key of claim-2.lua: a takeover by the same request moves
                                        its expiry with the record key's)
  ARGV[i]       fingerprint of item i
  then the lease and reservation of every item, as pairs, once when all items share them (#ARGV = n + 2),
  else one pair per item (#ARGV = 3n); for n = 1 the two layouts are the same:
  ARGV[n+1]     leaseMs (positive integer) of every item, when shared
  ARGV[n+2]     reserveMs (non-negative integer) of every item, when shared
  ARGV[n+2i-1]  leaseMs of item i, when per item
  ARGV[n+2i]    reserveMs of item i, when per item (as claim-2.lua's: not above leaseMs, nothing reserved)

  Returns  a table with one reply per item, in order, each as claim-2.lua returns it:
           token (integer) | {token, attempt, leaseUntil} | the blocking record's value (bulk)
           or, for an item that failed (its key holds another type, or a value this layout cannot read),
           {'error', message}: that item changed nothing, and the others are applied as usual. claim-2.lua
           fails the call instead; here one item's error must not fail the other callers of the batch,
           whose claims the items before it have already written (a script is not rolled back).
]]
-- Locals: a global lookup per call (string.sub is two table lookups) is a measurable share of a per-item cost
-- of a few microseconds.
local call, sub, find, format, tonumber = redis.call, string.sub, string.find, string.format, tonumber
local time = call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local clockToken = tonumber(time[1]) * 1000000 + tonumber(time[2])
local clockText = format('%.0f', clockToken)
local nowText = format('%.0f', nowMs)
local replies = {}
-- Every item passes two keys: its record key, and after all of those, its steps key.
local n = #KEYS / 2
-- Items of one batch nearly always share one lease and one reservation, sent once: their texts are built
-- once.
local shared = #ARGV == n + 2
local lastLeaseMs, lastReserveMs, leaseUntil, leaseText, keepText, freshPrefix

-- One item, as claim-2.lua; run under pcall (see Returns). It writes only in its last commands (the record,
-- then a same-request takeover's steps key, a PEXPIREAT that cannot fail once the SET did), so an item
-- that fails has written nothing.
local function claimItem(i)
  local key = KEYS[i]
  local fingerprint = ARGV[i]
  local leaseMs, reserveMs
  if shared then
    leaseMs, reserveMs = ARGV[n + 1], ARGV[n + 2]
  else
    leaseMs, reserveMs = ARGV[n + 2 * i - 1], ARGV[n + 2 * i]
  end
  if leaseMs ~= lastLeaseMs or reserveMs ~= lastReserveMs then
    lastLeaseMs, lastReserveMs = leaseMs, reserveMs
    local leaseNumber, reserveNumber = tonumber(leaseMs), tonumber(reserveMs)
    leaseUntil = nowMs + leaseNumber
    leaseText = format('%.0f', leaseUntil)
    -- The key's expiry: the lease end, or the reservation's end when it comes later.
    keepText = leaseText
    if reserveNumber > leaseNumber then
      keepText = format('%.0f', nowMs + reserveNumber)
    end
    freshPrefix = 'p|' .. clockText .. '|' .. leaseText .. '|' .. nowText .. '|1|'
  end
  local old = call('SET', key, freshPrefix .. fingerprint, 'NX', 'GET', 'PXAT', keepText)
  if old then
    local status = sub(old, 1, 1)
    local attempt = 1
    local createdText = nowText
    local blocked = false
    local sameRequest = false
    local tokenEnd = find(old, '|', 3, true)
    if status == 'p' or status == 'c' then
      local second = find(old, '|', tokenEnd + 1, true)
      local third = find(old, '|', second + 1, true)
      if status == 'p' then
        if tonumber(sub(old, tokenEnd + 1, second - 1)) > nowMs then
          blocked = true
        else
          -- A dead lease whose key still exists: reserved for its fingerprint until the key expires.
          local fourth = find(old, '|', third + 1, true)
          if sub(old, fourth + 1) ~= fingerprint and call('PEXPIRETIME', key) > nowMs then
            blocked = true
          else
            attempt = tonumber(sub(old, third + 1, fourth - 1)) + 1
            createdText = sub(old, second + 1, third - 1)
            -- The same request keeps its lineage: its steps live on with the key (see claim-2.lua).
            sameRequest = sub(old, fourth + 1) == fingerprint
          end
        end
      elseif tonumber(sub(old, second + 1, third - 1)) > nowMs then
        blocked = true
      end
    end
    if blocked then
      return old
    end
    local token = math.max(clockToken, tonumber(sub(old, 3, (tokenEnd or 0) - 1)) + 1)
    call('SET', key,
      'p|' .. format('%.0f', token) .. '|' .. leaseText .. '|' .. createdText .. '|' ..
        format('%d', attempt) .. '|' .. fingerprint,
      'PXAT', keepText)
    if sameRequest then
      local stepsKey = KEYS[n + i]
      call('PEXPIREAT', stepsKey, keepText)
    end
    return {token, attempt, leaseUntil}
  end
  return clockToken
end

for i = 1, n do
  local ok, reply = pcall(claimItem, i)
  if ok then
    replies[i] = reply
  else
    -- A failed redis.call raises a table ({err = message}), a Lua error a string.
    if type(reply) == 'table' then reply = reply.err end
    replies[i] = {'error', format('%s', reply)}
  end
end
return replies
