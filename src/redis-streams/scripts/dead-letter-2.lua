--[[
  dead-letter-2.lua: write a pending entry's dead letter and acknowledge the entry, as one operation. Only
  an entry still pending in the group gets a letter: a second write of the same letter (its redelivery,
  after the first write's reply was lost or given up on, or a late first write landing after a redelivery
  wrote it) finds the entry acked and writes nothing. Nothing is written before the checks that can fail
  (XADD to a key of another type raises, and the entry stays pending, unacked). Both keys must hash to one
  slot on Redis Cluster (otherwise CROSSSLOT, and the caller writes the letter and acks in two commands).
  Also the letter of an entry deleted while pending (reason `deleted`): XPENDING still lists its id, which
  the other scripts leave pending for this one to record and ack, so that no crash falls between the two.

  KEYS[1]  the consumed stream
  KEYS[2]  the dead-letter stream
  ARGV[1]  the consumer group
  ARGV[2]  the entry id
  ARGV[3]  the dead-letter stream's bound (`deadLetterMaxLen`: `MAXLEN ~`), or '' for none
  ARGV[4…] the letter's fields and values, in pairs

  Returns  1 when the letter was written and the entry acked, 0 when the entry was no longer pending
           (written or acked before: nothing done).
]]
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then
  return 0
end
if ARGV[3] == '' then
  redis.call('XADD', KEYS[2], '*', unpack(ARGV, 4))
else
  -- Approximate: Redis drops whole nodes of the oldest letters, cheap at every write.
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', unpack(ARGV, 4))
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return 1
