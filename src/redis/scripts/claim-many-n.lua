--[[
  claim-many-n.lua: a batch of claims in one call, each item applied exactly as claim-1.lua applies a single
  claim, in order (an item whose key appeared earlier in the batch sees that earlier item's record). One
  TIME for the whole batch: every item is judged at the same instant.

  KEYS[i]      record key of item i    <prefix>{<storage key>}, one per item, duplicates allowed
  ARGV[2i-1]   fingerprint of item i
  ARGV[2i]     leaseMs of item i (positive integer)

  Returns  a table with one reply per item, in order, each as claim-1.lua returns it:
           token (integer) | {token, attempt, leaseUntil} | the blocking record's value (bulk)
]]
local time = redis.call('TIME')
local nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local clockToken = tonumber(time[1]) * 1000000 + tonumber(time[2])
local clockText = string.format('%.0f', clockToken)
local nowText = string.format('%.0f', nowMs)
local replies = {}

for i = 1, #KEYS do
  local key = KEYS[i]
  local fingerprint = ARGV[2 * i - 1]
  local leaseUntil = nowMs + tonumber(ARGV[2 * i])
  local leaseText = string.format('%.0f', leaseUntil)
  local old = redis.call('SET', key,
    'p|' .. clockText .. '|' .. leaseText .. '|' .. nowText .. '|1|' .. fingerprint,
    'NX', 'GET', 'PXAT', leaseText)
  if not old then
    replies[i] = clockToken
  else
    local status = string.sub(old, 1, 1)
    local attempt = 1
    local createdText = nowText
    local blocked = false
    local tokenEnd = string.find(old, '|', 3, true)
    if status == 'p' or status == 'c' then
      local second = string.find(old, '|', tokenEnd + 1, true)
      local third = string.find(old, '|', second + 1, true)
      if status == 'p' then
        if tonumber(string.sub(old, tokenEnd + 1, second - 1)) > nowMs then
          blocked = true
        else
          local fourth = string.find(old, '|', third + 1, true)
          attempt = tonumber(string.sub(old, third + 1, fourth - 1)) + 1
          createdText = string.sub(old, second + 1, third - 1)
        end
      elseif tonumber(string.sub(old, second + 1, third - 1)) > nowMs then
        blocked = true
      end
    end
    if blocked then
      replies[i] = old
    else
      local token = math.max(clockToken, tonumber(string.sub(old, 3, (tokenEnd or 0) - 1)) + 1)
      redis.call('SET', key,
        'p|' .. string.format('%.0f', token) .. '|' .. leaseText .. '|' .. createdText .. '|' ..
          string.format('%d', attempt) .. '|' .. fingerprint,
        'PXAT', leaseText)
      replies[i] = {token, attempt, leaseUntil}
    end
  end
end
return replies
