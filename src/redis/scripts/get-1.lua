--[[
  get-1.lua: read the live record, judged by Redis's clock (a lease that ended this millisecond, before
  Redis expired its key, is already dead). Writes nothing.

  KEYS[1]  record hash            <prefix>{<storage key>}

  Returns  {}                                                                   when absent or dead
           {0, 'in_progress', fingerprint, token, leaseUntil, attempt, createdAt} for a live lease
           {0, 'completed', fingerprint, token, outcome, completedAt, expiresAt}  for a stored outcome
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local r = redis.call('HMGET', KEYS[1], 's', 'f', 't', 'l', 'a', 'c', 'o', 'd', 'e')
if r[1] == 'p' and tonumber(r[4]) > nowMs then
  return {0, 'in_progress', r[2], r[3], r[4], r[5], r[6]}
end
if r[1] == 'c' and tonumber(r[9]) > nowMs then
  return {0, 'completed', r[2], r[3], r[7], r[8], r[9]}
end
return {}
