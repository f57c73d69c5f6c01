--[[
  claim-2.lua: create an in_progress record if the key is absent or dead, take over an in_progress record
  whose lease expired unless the key is still reserved for another fingerprint, otherwise leave the record
  as it is and return it (one round trip either way).
  claim-many-n.lua applies exactly these rules to each item of a batch.

  KEYS[1]  record key             <prefix>{<storage key>}, a string (see redis-store.ts for the encoding)
  KEYS[2]  steps key              <prefix>{<storage key>}:s, a hash (same hash tag, so the same slot; see
                                  save-step-2.lua), touched only by a takeover by the same request
  ARGV[1]  fingerprint
  ARGV[2]  leaseMs (positive integer)
  ARGV[3]  reserveMs (non-negative integer): how long from now the key stays reserved for this fingerprint
           should the holder crash; a value not above leaseMs reserves nothing beyond the lease

  Returns  token (integer)                 when claimed on an absent key: attempt 1, lease end =
                                           floor(token / 1000) + leaseMs (the hot path: no table)
           {token, attempt, leaseUntil}    when claimed over a dead record or a tombstone
           the record's value (bulk)       when a live lease or a live outcome blocks the claim, or a dead
                                           lease still reserved for another fingerprint

  Time is Redis's own clock (TIME). The token is max(now in µs, previous token + 1), where the previous
  token comes from a dead record or from the tombstone ('r|<token>') a release leaves behind, so tokens
  strictly increase for the key even for a claim in the same microsecond as a release. SET NX GET creates
  the record and reads any previous value in one command; only when one exists does the script look at it.
  Numbers are written with string.format('%.0f'): tostring() would print only 14 significant digits.

  The reservation is the key's expiry, not a field of the value (whose layout older code also reads): an
  in_progress key expires at max(lease end, now + reserveMs), so an in_progress value whose lease has ended
  but whose key still exists is a reserved dead lease (or one that ended this very millisecond, which
  PEXPIRETIME tells apart: its key expires at its lease end).

  A takeover by the same request moves the steps key's expiry with the record key's: the takeover reserves
  the key anew, and the steps recorded under it must live as long as it does. Left to the holder's first
  step or lease extension, the steps of a crashed attempt expired with the first claim's reservation when
  the takeover crashed before either, and a third attempt, still a takeover, ran those steps again.
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local leaseMs = tonumber(ARGV[2])
local reserveMs = tonumber(ARGV[3])
local leaseUntil = nowMs + leaseMs
local leaseText = string.format('%.0f', leaseUntil)
local nowText = string.format('%.0f', nowMs)
-- The key's expiry: the lease end, or the reservation's end when it comes later.
local keepText = leaseText
if reserveMs > leaseMs then
  keepText = string.format('%.0f', nowMs + reserveMs)
end

local old = redis.call('SET', KEYS[1],
  'p|' .. string.format('%.0f', token) .. '|' .. leaseText .. '|' .. nowText .. '|1|' .. ARGV[1],
  'NX', 'GET', 'PXAT', keepText)
if not old then
  return token
end

-- A value exists: 'p|token|leaseUntil|createdAt|attempt|fp', 'c|token|completedAt|expiresAt|…' or 'r|token'.
local status = string.sub(old, 1, 1)
local attempt = 1
local createdText = nowText
local sameRequest = false
local tokenEnd = string.find(old, '|', 3, true)
if status == 'p' or status == 'c' then
  local second = string.find(old, '|', tokenEnd + 1, true)
  local third = string.find(old, '|', second + 1, true)
  if status == 'p' then
    if tonumber(string.sub(old, tokenEnd + 1, second - 1)) > nowMs then
      return old
    end
    -- The lease is over but the key still exists: reserved for its fingerprint until the key expires (or
    -- the lease ended this millisecond, before Redis expired the key). Another fingerprint gets the dead
    -- record while the reservation lasts; the same one takes it over.
    local fourth = string.find(old, '|', third + 1, true)
    if string.sub(old, fourth + 1) ~= ARGV[1] and redis.call('PEXPIRETIME', KEYS[1]) > nowMs then
      return old
    end
    attempt = tonumber(string.sub(old, third + 1, fourth - 1)) + 1
    createdText = string.sub(old, second + 1, third - 1)
    -- The same request keeps its lineage (createdAt and fingerprint), so its steps live on with the key.
    sameRequest = string.sub(old, fourth + 1) == ARGV[1]
  elseif tonumber(string.sub(old, second + 1, third - 1)) > nowMs then
    return old
  end
end
token = math.max(token, tonumber(string.sub(old, 3, (tokenEnd or 0) - 1)) + 1)
redis.call('SET', KEYS[1],
  'p|' .. string.format('%.0f', token) .. '|' .. leaseText .. '|' .. createdText .. '|' ..
    string.format('%d', attempt) .. '|' .. ARGV[1],
  'PXAT', keepText)
if sameRequest then
  redis.call('PEXPIREAT', KEYS[2], keepText)
end
return {token, attempt, leaseUntil}
