-- A node called use_workflow: park the parent on a new child run and create the child, in one
-- step (a tree shares one hash tag, so both runs' keys are in this slot). The parent holds no
-- lease and no job while it waits; the child's records say where its outcome goes, and the script
-- that ends the child records it there and queues the parent (notify_parent in _common.lua).
-- KEYS
--   run            the parent's hash
--   journal        the journal of its step
--   state          its workflow state
--   events         its stream
--   summary        its summary
--   leases         the leases
--   outbox         the outbox
--   runs           the run index (see list_run)
--   snapshots      its snapshots (see advance.lua)
--   child: child   the child run
--   queues...      the child's first job's queues (see hand_off)
-- ARGV
--   fence          the job's fence
--   step           the job's step
--   now            ms
--   run_id         the parent run
--   maxlen         the streams' cap
--   retention      ms a summary outlives its records
--   grace          ms the parent outlives its child's records
--   child: child   the child run
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step}), A.fence, {'running'})
if not cur then return err end
if cur.step ~= A.step then return stale('run is at step ' .. cur.step) end
local c = A.child
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
-- the parent outlives its child's records (the child has the parent's TTL from now)
local keep_ms = tonumber(redis.call('HGET', K.run, F.ttl)) + tonumber(A.grace)
redis.call('HSET', K.run, F.status, V.waiting, F.waiting, V.child .. c.run_id, F.expires, '',
  F.updated, A.now, F.crashes, 0, F.until_ms, tonumber(A.now) + keep_ms)
redis.call('ZREM', K.leases, A.run_id)
xadd_run(K.run, K.events, A.maxlen, 'child.started', c.parent_event)
redis.call('HSET', K.journal, c.check_field, c.check_entry)
expire_all(keep_ms, {K.run, K.journal, K.state, K.events, K.snapshots})
keep_summary(K.summary, keep_ms, A.retention)
if redis.call('EXISTS', K.child.run) == 1 or redis.call('EXISTS', K.child.summary) == 1 then
  return fence  -- the child exists already: the parent waits on it, nothing starts twice
end
-- a child is its tree's (its interrupts list under its tenant)
start_child(K.child, c, A.run_id, A.step, A.now, A.maxlen, A.retention, authority_of(K.run), K.outbox, K.queues, K)
return fence
