--[[
  get-1.lua: read the live record, judged by Redis's clock: a lease that has ended is dead even while its
  key lives on (it ended this millisecond, before Redis expired the key, or the key is reserved for its
  fingerprint, see claim-2.lua). Writes nothing.

  KEYS[1]  record key             <prefix>{<storage key>}

  Returns  the record's value (bulk), decoded by the client, or nil when absent, dead or a tombstone.
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
local tokenEnd = string.find(old, '|', 3, true)
local second = string.find(old, '|', tokenEnd + 1, true)
local liveUntil
if status == 'p' then
  liveUntil = string.sub(old, tokenEnd + 1, second - 1)
else
  liveUntil = string.sub(old, second + 1, string.find(old, '|', second + 1, true) - 1)
end
if tonumber(liveUntil) <= nowMs then
  return false
end
return old
