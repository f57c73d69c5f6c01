--[[
  complete-many-n.lua: a batch of completions in one call, each item applied exactly as complete-1.lua
  applies a single completion, in order. One TIME for the whole batch, read only if an item needs it.

  KEYS[i]      record key of item i    <prefix>{<storage key>}, one per item (n items)
  ARGV[2i-1]   token of item i (decimal integer)
  ARGV[2i]     outcome of item i (raw bytes)
  ARGV[2n+1]   retentionMs (positive integer) of every item, when all items share it (sent once); else
  ARGV[2n+i]   retentionMs of item i

  Returns  a table with one reply per item, in order: 1 completed, 0 fenced out, or {'error', message}
           for an item that failed (its key holds another type, or a value this layout cannot read): that
           item changed nothing, and the others are applied as usual (see claim-many-n.lua).
]]
-- Locals: a global lookup per call (string.sub is two table lookups) is a measurable share of a per-item cost
-- of a few microseconds.
local call, sub, find, format, tonumber = redis.call, string.sub, string.find, string.format, tonumber
local nowMs, nowText = nil, nil
local replies = {}
local n = #KEYS
local shared = #ARGV == 2 * n + 1
local sharedExpiresText

-- One item, as complete-1.lua; run under pcall (see Returns). It writes only in its last command.
local function completeItem(i)
  local key = KEYS[i]
  local tokenText = ARGV[2 * i - 1]
  local old = call('GET', key)
  local done = 0
  if old then
    local status = sub(old, 1, 1)
    local tokenEnd = find(old, '|', 3, true)
    if status ~= 'r' and sub(old, 3, tokenEnd - 1) == tokenText then
      if not nowMs then
        local time = call('TIME')
        nowMs = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        nowText = format('%.0f', nowMs)
      end
      local second = find(old, '|', tokenEnd + 1, true)
      local third = find(old, '|', second + 1, true)
      if status == 'c' then
        if tonumber(sub(old, second + 1, third - 1)) > nowMs then
          done = 1
        end
      elseif tonumber(sub(old, tokenEnd + 1, second - 1)) > nowMs then
        local fourth = find(old, '|', third + 1, true)
        local fingerprint = sub(old, fourth + 1)
        local expiresText
        if not shared then
          expiresText = format('%.0f', nowMs + tonumber(ARGV[2 * n + i]))
        else
          sharedExpiresText = sharedExpiresText or format('%.0f', nowMs + tonumber(ARGV[2 * n + 1]))
          expiresText = sharedExpiresText
        end
        call('SET', key,
          'c|' .. tokenText .. '|' .. nowText .. '|' .. expiresText .. '|' ..
            format('%d', #fingerprint) .. '|' .. fingerprint .. ARGV[2 * i],
          'PXAT', expiresText)
        done = 1
      end
    end
  end
  return done
end

for i = 1, n do
  local ok, reply = pcall(completeItem, i)
  if ok then
    replies[i] = reply
  else
    -- A failed redis.call raises a table ({err = message}), a Lua error a string.
    if type(reply) == 'table' then reply = reply.err end
    replies[i] = {'error', format('%s', reply)}
  end
end
return replies
