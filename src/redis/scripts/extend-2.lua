--[[
  extend-2.lua: push the lease of the in_progress record held by a token to now + leaseMs, never moving
  the key's expiry earlier: a claim's reservation (the key outliving its lease, see claim-2.lua) is kept.
  The record's steps (see save-step-2.lua) follow its expiry; steps of an earlier record are deleted.

  KEYS[1]  record key             <prefix>{<storage key>}
  KEYS[2]  steps key              <prefix>{<storage key>}:s, a hash (same hash tag, so the same slot)
  ARGV[1]  token (decimal integer)
  ARGV[2]  leaseMs (positive integer)

  Returns  1 when extended, 0 when fenced out (other token, expired, completed or absent).
]]
local old = redis.call('GET', KEYS[1])
if not old or string.sub(old, 1, 1) ~= 'p' then
  return 0
end
local tokenEnd = string.find(old, '|', 3, true)
if string.sub(old, 3, tokenEnd - 1) ~= ARGV[1] then
  return 0
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local second = string.find(old, '|', tokenEnd + 1, true)
if tonumber(string.sub(old, tokenEnd + 1, second - 1)) <= nowMs then
  return 0
end
local leaseUntil = nowMs + tonumber(ARGV[2])
local leaseText = string.format('%.0f', leaseUntil)
-- The key expires at the later of the new lease end and its current expiry (the reservation's end, or the
-- previous lease end).
local keepText = string.format('%.0f', math.max(leaseUntil, redis.call('PEXPIRETIME', KEYS[1])))
-- Same value with the new lease end; the rest ('|createdAt|attempt|fp') is kept as is.
redis.call('SET', KEYS[1], 'p|' .. ARGV[1] .. '|' .. leaseText .. string.sub(old, second), 'PXAT',
  keepText)
-- Steps live as long as their record: one HGET when the record has none (the usual case).
local lineage = redis.call('HGET', KEYS[2], '#')
if lineage then
  local third = string.find(old, '|', second + 1, true)
  local fourth = string.find(old, '|', third + 1, true)
  if lineage == string.sub(old, second + 1, third - 1) .. '|' .. string.sub(old, fourth + 1) then
    redis.call('PEXPIREAT', KEYS[2], keepText)
  else
    redis.call('UNLINK', KEYS[2])
  end
end
return 1
