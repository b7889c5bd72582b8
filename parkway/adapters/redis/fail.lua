-- Commit a failed run.
-- KEYS: 1 run, 2 workflow state, 3 events, 4 summary
-- ARGV: 1 fence, 2 error blob, 3 now, 4 retention ms, 5 maxlen, 6 run.failed blob, 7 done blob
local cur, err = check_fence(KEYS[1], ARGV[1], {'queued', 'running'})
if not cur then return err end
redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[2], 'updated', ARGV[3])
redis.call('HSET', KEYS[4], 'status', 'failed', 'updated', ARGV[3])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
xadd(KEYS[3], ARGV[5], 'run.failed', ARGV[6])
xadd(KEYS[3], ARGV[5], 'done', ARGV[7])
expire_all(redis.call('HGET', KEYS[1], 'ttl'), {KEYS[1], KEYS[2], KEYS[3]})
return 1
