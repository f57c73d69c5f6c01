--[[
  complete-1.lua: turn the in_progress record held by a token (with a live lease) into completed.
  Idempotent per token: completing again after success reports success and changes nothing.

  KEYS[1]  record hash            <prefix>{<storage key>}
  ARGV[1]  token
  ARGV[2]  outcome (raw bytes, stored byte-exact)
  ARGV[3]  retentionMs (positive integer)

  Returns  1 when completed (now or by an earlier call with the same token), 0 when fenced out.

  The in-progress fields (l, a, c) stay in the hash: removing them would cost a command on every
  completion for a few bytes; readers of a completed record ignore them.
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local token = tonumber(ARGV[1])

local r = redis.call('HMGET', KEYS[1], 's', 't', 'l', 'e')
if r[1] == 'c' then
  if tonumber(r[2]) == token and tonumber(r[4]) > nowMs then
    return 1
  end
  return 0
end
if r[1] ~= 'p' or tonumber(r[2]) ~= token or tonumber(r[3]) <= nowMs then
  return 0
end

local expiresAt = nowMs + tonumber(ARGV[3])
local fmt = function(n) return string.format('%.0f', n) end
redis.call('HSET', KEYS[1], 's', 'c', 'o', ARGV[2], 'd', fmt(nowMs), 'e', fmt(expiresAt))
redis.call('PEXPIREAT', KEYS[1], fmt(expiresAt))
return 1
