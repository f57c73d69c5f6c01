--[[
  claim-many-n.lua: a batch of claims in one call, each item applied exactly as claim-1.lua applies a single
  claim, in order (an item whose key appeared earlier in the batch sees that earlier item's record). One
  TIME for the whole batch: every item is judged at the same instant.

  KEYS[i]      record key of item i    <prefix>{<storage key>}, one per item, duplicates allowed (n items)
  ARGV[i]      fingerprint of item i
  ARGV[n+1]    leaseMs (positive integer) of every item, when all items share it (sent once); else
  ARGV[n+i]    leaseMs of item i

  Returns  a table with one reply per item, in order, each as claim-1.lua returns it:
           token (integer) | {token, attempt, leaseUntil} | the blocking record's value (bulk)
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
local n = #KEYS
-- Items of one batch nearly always share one lease, sent once: its texts are built once.
local shared = #ARGV == n + 1
local lastLeaseMs, leaseUntil, leaseText, freshPrefix

for i = 1, n do
  local key = KEYS[i]
  local fingerprint = ARGV[i]
  local leaseMs = shared and ARGV[n + 1] or ARGV[n + i]
  if leaseMs ~= lastLeaseMs then
    lastLeaseMs = leaseMs
    leaseUntil = nowMs + tonumber(leaseMs)
    leaseText = format('%.0f', leaseUntil)
    freshPrefix = 'p|' .. clockText .. '|' .. leaseText .. '|' .. nowText .. '|1|'
  end
  local old = call('SET', key, freshPrefix .. fingerprint, 'NX', 'GET', 'PXAT', leaseText)
  if not old then
    replies[i] = clockToken
  else
    local status = sub(old, 1, 1)
    local attempt = 1
    local createdText = nowText
    local blocked = false
    local tokenEnd = find(old, '|', 3, true)
    if status == 'p' or status == 'c' then
      local second = find(old, '|', tokenEnd + 1, true)
      local third = find(old, '|', second + 1, true)
      if status == 'p' then
        if tonumber(sub(old, tokenEnd + 1, second - 1)) > nowMs then
          blocked = true
        else
          local fourth = find(old, '|', third + 1, true)
          attempt = tonumber(sub(old, third + 1, fourth - 1)) + 1
          createdText = sub(old, second + 1, third - 1)
        end
      elseif tonumber(sub(old, second + 1, third - 1)) > nowMs then
        blocked = true
      end
    end
    if blocked then
      replies[i] = old
    else
      local token = math.max(clockToken, tonumber(sub(old, 3, (tokenEnd or 0) - 1)) + 1)
      call('SET', key,
        'p|' .. format('%.0f', token) .. '|' .. leaseText .. '|' .. createdText .. '|' ..
          format('%d', attempt) .. '|' .. fingerprint,
        'PXAT', leaseText)
      replies[i] = {token, attempt, leaseUntil}
    end
  end
end
return replies
