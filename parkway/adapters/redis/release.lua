-- Give an activation back without running it (this worker cannot load the run's workflow):
-- the run goes back to queued under a new fence, with an outbox entry dated now, so the
-- reconciler enqueues it again once the entry is old enough; the lease is released.
-- KEYS: 1 run, 2 events, 3 outbox, 4 leases, 5 summary, 6 metrics
-- ARGV: 1 fence, 2 step, 3 now, 4 maxlen, 5 event blob, 6 run id, 7 retention ms
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'status', 'queued', 'updated', ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[6] .. ':' .. ARGV[2] .. ':' .. fence)
xadd_run(KEYS[1], KEYS[2], ARGV[4], 'node.deferred', ARGV[5])
redis.call('HINCRBY', KEYS[6], 'deferred', 1)
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[2]})
keep_summary(KEYS[5], ttl, ARGV[7])
return fence
