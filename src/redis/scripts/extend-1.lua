--[[
  extend-1.lua: push the lease of the in_progress record held by a token to now + leaseMs.

  KEYS[1]  record hash            <prefix>{<storage key>}
  ARGV[1]  token
  ARGV[2]  leaseMs (positive integer)

  Returns  1 when extended, 0 when fenced out (other token, expired, completed or absent).
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local r = redis.call('HMGET', KEYS[1], 's', 't', 'l')
if r[1] ~= 'p' or tonumber(r[2]) ~= tonumber(ARGV[1]) or tonumber(r[3]) <= nowMs then
  return 0
end
local leaseUntil = string.format('%.0f', nowMs + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'l', leaseUntil)
redis.call('PEXPIREAT', KEYS[1], leaseUntil)
return 1
