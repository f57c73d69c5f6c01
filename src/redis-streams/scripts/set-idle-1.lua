--[[
  set-idle-1.lua: re-own pending entries and set their idle time (a retry's delay, a long handler's idle
  reset, close() handing entries back), telling apart the two reasons an id is not claimed. XCLAIM alone
  answers both the same way, and the id no longer pending afterwards: an entry another consumer reclaimed,
  ran and acked (then trimmed) was reported deleted and dead-lettered, though it was processed. Decided
  here before any XCLAIM, atomically: an id no longer pending was settled elsewhere (nothing to do); an
  id still pending whose entry is gone was deleted while pending (returned for the caller to report). Such
  an id is left pending, neither acked nor claimed (Redis 7's XCLAIM would drop it): it leaves the pending
  list only with its letter (dead-letter-2.lua), so a process that dies, or a letter that fails, before
  that leaves it for a claim round to record, instead of acked with no record. One XCLAIM per id: no
  `unpack`, whose limit (~8,000 values) a large batch would pass.

  KEYS[1]  the stream
  ARGV[1]  the consumer group
  ARGV[2]  the consumer taking the entries
  ARGV[3]  the idle time to set, in ms
  ARGV[4…] the entry ids

  Returns  the ids deleted while pending (still pending, their idle time unchanged), in order.
]]
local deleted = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  if #redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1) > 0 then
    if #redis.call('XRANGE', KEYS[1], id, id) == 0 then
      -- Not claimed: Redis 7's XCLAIM would drop it silently (Redis 6.2's keep it).
      deleted[#deleted + 1] = id
    else
      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id, 'IDLE', ARGV[3], 'JUSTID')
    end
  end
end
return deleted
