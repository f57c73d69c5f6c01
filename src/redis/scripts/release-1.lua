--[[
  release-1.lua: delete the in_progress record held by a token with a live lease, leaving a tombstone
  (status 'r' and the token, nothing else) so that the next claim still gets a larger token, even within
  the same microsecond. The tombstone is not a record: get, claim and stats treat the key as absent.

  KEYS[1]  record hash            <prefix>{<storage key>}
  ARGV[1]  token
  ARGV[2]  tombstone lifetime in ms (positive integer)

  Returns  1 when released, 0 when fenced out (other token, expired, completed or absent).
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local r = redis.call('HMGET', KEYS[1], 's', 't', 'l')
if r[1] ~= 'p' or tonumber(r[2]) ~= tonumber(ARGV[1]) or tonumber(r[3]) <= nowMs then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'r', 't', r[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
