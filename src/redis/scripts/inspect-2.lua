--[[
  inspect-2.lua: the record of a key as an operator sees it (Store.inspect), with what its value alone does
  not say: how long a dead lease stays reserved for its request (the key's expiry, see claim-2.lua), the
  steps recorded under it, and Redis's clock. Writes nothing (load-steps-2.lua tidies the steps key; this
  only reads it).

  KEYS[1]  record key             <prefix>{<storage key>}
  KEYS[2]  steps key              <prefix>{<storage key>}:s (see save-step-2.lua)

  Returns  nil when nothing about the key affects a claim any more (absent, a tombstone, a completed
           record past its expiry, or a dead lease whose key is not reserved), else
           {value (bulk), the key's expiry (PEXPIRETIME, ms), nowMs, steps}, steps a flat array
           {name1, result1, ...} of the in_progress record's own lineage (empty for a completed record,
           or when none was recorded).
]]
local old = redis.call('GET', KEYS[1])
if not old then
  return false
end
local status = string.sub(old, 1, 1)
if status ~= 'p' and status ~= 'c' then
  return false
end
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local keyExpiresAt = redis.call('PEXPIRETIME', KEYS[1])
local tokenEnd = string.find(old, '|', 3, true)
local second = string.find(old, '|', tokenEnd + 1, true)
local third = string.find(old, '|', second + 1, true)
local steps = {}
if status == 'c' then
  if tonumber(string.sub(old, second + 1, third - 1)) <= nowMs then
    return false
  end
else
  -- A dead lease counts while its key lives on past this millisecond: reserved for its request.
  if tonumber(string.sub(old, tokenEnd + 1, second - 1)) <= nowMs and keyExpiresAt <= nowMs then
    return false
  end
  local fourth = string.find(old, '|', third + 1, true)
  local lineage = string.sub(old, second + 1, third - 1) .. '|' .. string.sub(old, fourth + 1)
  if redis.call('HGET', KEYS[2], '#') == lineage then
    local fields = redis.call('HGETALL', KEYS[2])
    for i = 1, #fields, 2 do
      if fields[i] ~= '#' then
        steps[#steps + 1] = fields[i]
        steps[#steps + 1] = fields[i + 1]
      end
    end
  end
end
return {old, keyExpiresAt, nowMs, steps}
