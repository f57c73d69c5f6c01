--[[
  reclaim-1.lua: one reclaim round, as XAUTOCLAIM does it, but reporting as deleted only the entries that
  were idle for `minIdle` (abandoned) when deleted. Redis 7's XAUTOCLAIM (and XCLAIM) drop every deleted id
  they meet from the pending list whatever its idle time, and so reported as lost an entry a live consumer
  was still handling (and would settle): here only the ids XPENDING lists as idle enough are claimed, so a
  held entry is left to its holder. Also gives each claimed entry's delivery count (XPENDING's, plus this
  claim), where XAUTOCLAIM needed an XPENDING per entry. Looks at `ARGV[6]` pending ids at most per round,
  as XAUTOCLAIM does (COUNT × 10): `XPENDING … IDLE` skips the ids not idle enough without a bound, so a
  round over a long pending list held by live consumers walked all of it (about 4 ms for 50,000 ids) at
  every round of every consumer. A deleted id is not claimed but left pending (Redis 7's XCLAIM would drop
  it): it leaves the pending list only with its letter (dead-letter-2.lua), so a process that dies, or a
  letter that fails, after this round leaves it for a later round, instead of gone with no record.
  The ids the calling process is handling (`ARGV[7]` on) are not claimed either, however idle: their idle
  resets reached Redis late (an event loop stalled past `minIdle`), and claiming one counted a delivery
  and started a second one of an entry whose first was still alive (a deleted one is still returned, for
  its holder to learn of it).

  KEYS[1]  the stream
  ARGV[1]  the consumer group
  ARGV[2]  the consumer claiming
  ARGV[3]  minIdle in ms
  ARGV[4]  the cursor: the id to start from ('0-0' first, then what the last round returned)
  ARGV[5]  how many entries to claim, at most
  ARGV[6]  how many pending ids to look at, at most
  ARGV[7…] the ids the calling process is handling: never claimed here

  Returns  { next cursor ('0-0' once the pending list is all looked at), claimed entries (XCLAIM's reply:
           {id, {field, value, …}}), ids deleted while pending (still pending: the caller records them
           and acks them in one step), the claimed entries' delivery counts, in order }
]]
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[4], '+', ARGV[6])
local minIdle = tonumber(ARGV[3])
local most = tonumber(ARGV[5])
local ids = {}
local counts = {}
-- The last id looked at: the next round starts after it.
local last
for _, item in ipairs(pending) do
  if #ids == most then
    break
  end
  last = item[1]
  if tonumber(item[3]) >= minIdle then
    ids[#ids + 1] = item[1]
    counts[item[1]] = item[4]
  end
end
-- Looked up only for the ids idle enough: none at most rounds (every pending entry live, or waiting for
-- its retry), which then skip building a table of every held id (tens of ms a round at 100,000 ids).
local held = {}
if #ids > 0 then
  for i = 7, #ARGV do
    held[ARGV[i]] = true
  end
end
local deleted = {}
local live = {}
for _, id in ipairs(ids) do
  if #redis.call('XRANGE', KEYS[1], id, id) == 0 then
    deleted[#deleted + 1] = id
  elseif not held[id] then
    live[#live + 1] = id
  end
end
local cursor = '0-0'
if #ids == most or #pending == tonumber(ARGV[6]) then
  cursor = '(' .. last
end
if #live == 0 then
  return { cursor, {}, deleted, {} }
end
-- Every id is idle enough and its entry exists (nothing runs between the commands): XCLAIM takes them all.
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], unpack(live))
local entries = {}
local claimedCounts = {}
for _, entry in ipairs(claimed) do
  -- Defensive, as before the existence check: Redis 6.2 answers a deleted entry with a nil (false here).
  if type(entry) == 'table' and type(entry[2]) == 'table' then
    entries[#entries + 1] = entry
    claimedCounts[#claimedCounts + 1] = counts[entry[1]] + 1
  end
end
return { cursor, entries, deleted, claimedCounts }
