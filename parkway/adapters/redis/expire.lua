-- Record the expiry of an interrupt past its TTL: mark it, end the run that waited on it as
-- expired with an interrupt.expired event, and unindex it.
-- KEYS: 1 run, 2 interrupts, 3 pending, 4 events, 5 summary,
--       6 index newest, 7 index expiring, 8 index newest of workflow, 9 index expiring of workflow
-- ARGV: 1 request id, 2 now, 3 member newest, 4 member expiring, 5 retention ms, 6 maxlen,
--       7 interrupt.expired blob, 8 done blob
if redis.call('EXISTS', KEYS[3]) == 1 then return 'pending' end
redis.call('ZREM', KEYS[6], ARGV[3])
redis.call('ZREM', KEYS[7], ARGV[4])
redis.call('ZREM', KEYS[8], ARGV[3])
redis.call('ZREM', KEYS[9], ARGV[4])
if redis.call('HGET', KEYS[2], 's:' .. ARGV[1]) ~= 'pending' then return 'gone' end
redis.call('HSET', KEYS[2], 's:' .. ARGV[1], 'expired')
local cur = redis.call('HMGET', KEYS[1], 'status', 'waiting')
if cur[1] == 'waiting' and cur[2] == ARGV[1] then
  redis.call('HINCRBY', KEYS[1], 'fence', 1)
  redis.call('HSET', KEYS[1], 'status', 'expired', 'waiting', '', 'updated', ARGV[2])
  redis.call('HSET', KEYS[5], 'status', 'expired', 'updated', ARGV[2])
  keep_summary(KEYS[5], records_left(KEYS[1]), ARGV[5])
  xadd(KEYS[4], ARGV[6], 'interrupt.expired', ARGV[7])
  xadd(KEYS[4], ARGV[6], 'done', ARGV[8])
end
return 'expired'
