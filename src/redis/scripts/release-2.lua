--[[
  release-2.lua: delete the in_progress record held by a token with a live lease, leaving a tombstone
  ('r|<token>', nothing else) so that the next claim still gets a larger token, even within the same
  microsecond. The tombstone is not a record: get, claim and stats treat the key as absent. The record's
  steps (see save-step-2.lua) go with it: a new claim, even in the same millisecond with the same
  fingerprint, starts with none.

  KEYS[1]  record key             <prefix>{<storage key>}
  KEYS[2]  steps key              <prefix>{<storage key>}:s, a hash (same hash tag, so the same slot)
  ARGV[1]  token (decimal integer)
  ARGV[2]  tombstone lifetime in ms (positive integer)

  Returns  1 when released, 0 when fenced out (other token, expired, completed or absent).
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
if tonumber(string.sub(old, tokenEnd + 1, string.find(old, '|', tokenEnd + 1, true) - 1)) <= nowMs then
  return 0
end
redis.call('SET', KEYS[1], 'r|' .. ARGV[1], 'PX', ARGV[2])
redis.call('UNLINK', KEYS[2])
return 1
