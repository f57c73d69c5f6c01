--[[
  complete-1.lua: turn the in_progress record held by a token (with a live lease) into completed.
  Idempotent per token: completing again after success reports success and changes nothing.
  complete-many-n.lua applies exactly these rules to each item of a batch.

  KEYS[1]  record key             <prefix>{<storage key>}
  ARGV[1]  token (decimal integer, as the claim returned it)
  ARGV[2]  outcome (raw bytes, stored byte-exact)
  ARGV[3]  retentionMs (positive integer)

  Returns  1 when completed (now or by an earlier call with the same token), 0 when fenced out.

  Reads 'p|token|leaseUntil|createdAt|attempt|fp' and writes
  'c|token|completedAt|expiresAt|<byte length of fp>|<fp><outcome>' with the key expiring at expiresAt.
  Tokens are compared as text: both sides are canonical decimal integers.
]]
local old = redis.call('GET', KEYS[1])
if not old then
  return 0
end
local status = string.sub(old, 1, 1)
local tokenEnd = string.find(old, '|', 3, true)
if status == 'r' or string.sub(old, 3, tokenEnd - 1) ~= ARGV[1] then
  return 0
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local second = string.find(old, '|', tokenEnd + 1, true)
local third = string.find(old, '|', second + 1, true)
if status == 'c' then
  if tonumber(string.sub(old, second + 1, third - 1)) > nowMs then
    return 1
  end
  return 0
end
if tonumber(string.sub(old, tokenEnd + 1, second - 1)) <= nowMs then
  return 0
end
local fourth = string.find(old, '|', third + 1, true)
local fingerprint = string.sub(old, fourth + 1)
local expiresText = string.format('%.0f', nowMs + tonumber(ARGV[3]))
redis.call('SET', KEYS[1],
  'c|' .. ARGV[1] .. '|' .. string.format('%.0f', nowMs) .. '|' .. expiresText .. '|' ..
    string.format('%d', #fingerprint) .. '|' .. fingerprint .. ARGV[2],
  'PXAT', expiresText)
return 1
