--[[
  claim-1.lua: create an in_progress record if the key is absent or dead, take over an in_progress record
  whose lease expired, otherwise leave the record as it is and return it (one round trip either way).

  KEYS[1]  record hash            <prefix>{<storage key>}
  ARGV[1]  fingerprint
  ARGV[2]  leaseMs (positive integer)

  Returns  {1, token, attempt, leaseUntil}                                      when claimed
           {0, 'in_progress', fingerprint, token, leaseUntil, attempt, createdAt} when a live lease blocks
           {0, 'completed', fingerprint, token, outcome, completedAt, expiresAt}  when an outcome is stored

  Time is Redis's own clock (TIME). The token is max(now in µs, previous token + 1), where the previous
  token comes from a dead record or from the tombstone (status 'r') a release leaves behind, so tokens
  strictly increase for the key even for a claim in the same microsecond as a release. Every read and
  check happens before the first write (Redis has no rollback).
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local token = tonumber(time[1]) * 1000000 + tonumber(time[2])
local leaseMs = tonumber(ARGV[2])

local r = redis.call('HMGET', KEYS[1], 's', 'f', 't', 'l', 'a', 'c', 'o', 'd', 'e')
local status = r[1]
local attempt = 1
local createdAt = nowMs
if status == 'p' then
  if tonumber(r[4]) > nowMs then
    return {0, 'in_progress', r[2], r[3], r[4], r[5], r[6]}
  end
  -- The lease is over but Redis has not expired the key yet (same millisecond): take it over.
  attempt = tonumber(r[5]) + 1
  createdAt = tonumber(r[6])
elseif status == 'c' and tonumber(r[9]) > nowMs then
  return {0, 'completed', r[2], r[3], r[7], r[8], r[9]}
end
if status then
  token = math.max(token, tonumber(r[3]) + 1)
  redis.call('DEL', KEYS[1])
end

local leaseUntil = nowMs + leaseMs
local fmt = function(n) return string.format('%.0f', n) end
redis.call('HSET', KEYS[1], 's', 'p', 'f', ARGV[1], 't', fmt(token), 'l', fmt(leaseUntil),
  'a', fmt(attempt), 'c', fmt(createdAt))
redis.call('PEXPIREAT', KEYS[1], fmt(leaseUntil))
return {1, token, attempt, leaseUntil}
