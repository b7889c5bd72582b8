-- Give an activation back without running it (this worker cannot load the run's workflow):
-- the run goes back to queued under a new fence, with an outbox entry dated now, so the
-- reconciler enqueues it again once the entry is old enough; the lease is released.
-- KEYS
--   run            the run's hash
--   events         its stream
--   outbox         the outbox
--   leases         the leases
--   summary        the run's summary
--   metrics        the counters
-- ARGV
--   fence          the job's fence
--   step           the job's step
--   now            ms
--   maxlen         the stream's cap
--   event          the node.deferred blob
--   run_id         the run
--   retention      ms the summary outlives the records
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step}), A.fence, {'running'})
if not cur then return err end
if cur.step ~= A.step then return stale('run is at step ' .. cur.step) end
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
local ttl = redis.call('HGET', K.run, F.ttl)
redis.call('HSET', K.run, F.status, 'queued', F.updated, A.now, F.until_ms, tonumber(A.now) + tonumber(ttl))
redis.call('ZREM', K.leases, A.run_id)
redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, A.step, fence))
xadd_run(K.run, K.events, A.maxlen, 'node.deferred', A.event)
redis.call('HINCRBY', K.metrics, 'deferred', 1)
expire_all(ttl, {K.run, K.events})
keep_summary(K.summary, ttl, A.retention)
return fence
