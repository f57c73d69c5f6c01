--[[
  extend-1.lua: push the lease of the in_progress record held by a token to now + leaseMs.

  KEYS[1]  record key             <prefix>{<storage key>}
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
local leaseText = string.format('%.0f', nowMs + tonumber(ARGV[2]))
-- Same value with the new lease end; the rest ('|createdAt|attempt|fp') is kept as is.
redis.call('SET', KEYS[1], 'p|' .. ARGV[1] .. '|' .. leaseText .. string.sub(old, second), 'PXAT', leaseText)
return 1
