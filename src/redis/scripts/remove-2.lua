--[[
  remove-2.lua: remove the live record whatever its status (admin), leaving a tombstone ('r|<token>') so
  that a later claim still gets a larger token. A dead lease whose key is still reserved (see claim-2.lua)
  is not a record, but it is removed the same way: after a delete, the key is free to any request. The
  steps recorded on the removed record (see save-step-2.lua) are deleted with it.

  KEYS[1]  record key             <prefix>{<storage key>}
  KEYS[2]  steps key              <prefix>{<storage key>}:s, a hash (same hash tag, so the same slot)
  ARGV[1]  tombstone lifetime in ms (positive integer)

  Returns  1 when a live record was removed, 0 when there was none (absent, dead or a tombstone),
           a dead lease being removed all the same.
]]
local old = redis.call('GET', KEYS[1])
if not old then
  return 0
end
local status = string.sub(old, 1, 1)
if status ~= 'p' and status ~= 'c' then
  return 0
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local tokenEnd = string.find(old, '|', 3, true)
local second = string.find(old, '|', tokenEnd + 1, true)
local liveUntil
if status == 'p' then
  liveUntil = string.sub(old, tokenEnd + 1, second - 1)
else
  liveUntil = string.sub(old, second + 1, string.find(old, '|', second + 1, true) - 1)
end
local live = tonumber(liveUntil) > nowMs
if not live and status == 'c' then
  return 0
end
redis.call('SET', KEYS[1], 'r|' .. string.sub(old, 3, tokenEnd - 1), 'PX', ARGV[1])
redis.call('UNLINK', KEYS[2])
if live then
  return 1
end
return 0
