--[[
  remove-1.lua: remove the live record whatever its status (admin), leaving a tombstone (status 'r' and
  the record's token) so that a later claim still gets a larger token.

  KEYS[1]  record hash            <prefix>{<storage key>}
  ARGV[1]  tombstone lifetime in ms (positive integer)

  Returns  1 when a live record was removed, 0 when there was none (absent, dead or a tombstone).
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local r = redis.call('HMGET', KEYS[1], 's', 't', 'l', 'e')
local live = (r[1] == 'p' and tonumber(r[3]) > nowMs) or (r[1] == 'c' and tonumber(r[4]) > nowMs)
if not live then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'r', 't', r[2])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
