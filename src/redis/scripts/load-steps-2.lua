--[[
  load-steps-2.lua: the step results recorded on the in_progress record held by a token (with a live
  lease): those its holder saved and those of the attempts it took over for the same request (see
  save-step-2.lua for the steps key and its lineage field '#').

  KEYS[1]  record key             <prefix>{<storage key>}
  KEYS[2]  steps key              <prefix>{<storage key>}:s, a hash (same hash tag, so the same slot)
  ARGV[1]  token (decimal integer)

  Returns  nil when fenced out (other token, expired, completed, a tombstone or absent), else a flat
           array {name1, result1, name2, result2, ...} (empty when the record has no steps), results as
           raw bytes.

  Steps whose lineage is not the record's belong to an earlier record (another request took the key over,
  or the key was claimed afresh): they are not returned, and are deleted. The steps key's expiry is moved
  to the record key's: a takeover (which does not touch the steps key) may have pushed that later.
]]
local old = redis.call('GET', KEYS[1])
if not old or string.sub(old, 1, 1) ~= 'p' then
  return false
end
local tokenEnd = string.find(old, '|', 3, true)
if string.sub(old, 3, tokenEnd - 1) ~= ARGV[1] then
  return false
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local second = string.find(old, '|', tokenEnd + 1, true)
local leaseUntil = tonumber(string.sub(old, tokenEnd + 1, second - 1))
if leaseUntil <= nowMs then
  return false
end
local current = redis.call('HGET', KEYS[2], '#')
if not current then
  return {}
end
local third = string.find(old, '|', second + 1, true)
local fourth = string.find(old, '|', third + 1, true)
if current ~= string.sub(old, second + 1, third - 1) .. '|' .. string.sub(old, fourth + 1) then
  redis.call('UNLINK', KEYS[2])
  return {}
end
local fields = redis.call('HGETALL', KEYS[2])
local steps = {}
for i = 1, #fields, 2 do
  if fields[i] ~= '#' then
    steps[#steps + 1] = fields[i]
    steps[#steps + 1] = fields[i + 1]
  end
end
redis.call('PEXPIREAT', KEYS[2],
  string.format('%.0f', math.max(leaseUntil, redis.call('PEXPIRETIME', KEYS[1]))))
return steps
