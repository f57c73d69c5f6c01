--[[
  save-step-2.lua: record the result of a named step on the in_progress record held by a token (with a
  live lease), replacing an earlier result of that name.

  KEYS[1]  record key             <prefix>{<storage key>}
  KEYS[2]  steps key              <prefix>{<storage key>}:s, a hash (same hash tag, so the same slot)
  ARGV[1]  token (decimal integer)
  ARGV[2]  step name              [A-Za-z0-9._:-]{1,100} (checked by the store), a field of the hash
  ARGV[3]  the step's result (raw bytes, stored byte-exact)

  Returns  1 when recorded, 0 when fenced out (other token, expired, completed, a tombstone or absent).

  The steps key is a hash: one field per step, and the field '#' (never a step name) holding the lineage
  of the record the steps belong to, '<createdAt>|<fingerprint>' as the record's value has them. A
  takeover by the same request keeps both (createdAt is kept across takeovers), so its steps carry over;
  a takeover by another fingerprint, or a fresh claim (a new createdAt), does not match, and the steps
  found are an earlier record's: they are deleted before this one is recorded. Claims and completions
  never touch the steps key (their hot paths stay as they are): the lineage tells records apart instead.
  The steps key expires with the record key (PEXPIRETIME), or at the lease end if that comes later.
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
local leaseUntil = tonumber(string.sub(old, tokenEnd + 1, second - 1))
if leaseUntil <= nowMs then
  return 0
end
local third = string.find(old, '|', second + 1, true)
local fourth = string.find(old, '|', third + 1, true)
local lineage = string.sub(old, second + 1, third - 1) .. '|' .. string.sub(old, fourth + 1)
local current = redis.call('HGET', KEYS[2], '#')
if current == lineage then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
else
  if current then
    redis.call('UNLINK', KEYS[2])
  end
  redis.call('HSET', KEYS[2], '#', lineage, ARGV[2], ARGV[3])
end
redis.call('PEXPIREAT', KEYS[2],
  string.format('%.0f', math.max(leaseUntil, redis.call('PEXPIRETIME', KEYS[1]))))
return 1
