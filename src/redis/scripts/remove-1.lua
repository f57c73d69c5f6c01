--[[
  remove-1.lua: remove the live record whatever its status (admin), leaving a tombstone ('r|<token>') so
  that a later claim still gets a larger token.

  KEYS[1]  record key             <prefix>{<storage key>}
  ARGV[1]  tombstone lifetime in ms (positive integer)

  Returns  1 when a live record was removed, 0 when there was none (absent, dead or a tombstone).
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
if tonumber(liveUntil) <= nowMs then
  return 0
end
redis.call('SET', KEYS[1], 'r|' .. string.sub(old, 3, tokenEnd - 1), 'PX', ARGV[1])
return 1
