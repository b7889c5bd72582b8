-- A node called use_workflows: start the next children of its fan-out (as many as its bound lets
-- run), each created with its first job and added to the parent's fan-out set, and park the parent
-- on them, in one step (a tree shares one hash tag: every run's keys are in this slot). A child's end
-- records its outcome in the parent's journal and leaves the set (notify_parent in _common.lua).
-- The attempt counted `live` children started and not ended in the journal it read; when the set
-- holds fewer than that plus the new ones, some ended since: their ends found the parent running
-- and queued nothing, so the parent is queued again now instead of parked (its replay reads them).
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
--   fanout         its fan-out set
--   queues...      the queues of every job this script enqueues (see hand_off)
--   children...: child  the new children
-- ARGV
--   #queues        how many queues
--   #job           how many arguments the parent's job takes
--   #children      how many new children
--   fence          the job's fence
--   step           the job's step
--   now            ms
--   run_id         the parent run
--   maxlen         the streams' cap
--   retention      ms a summary outlives its records
--   grace          ms the parent outlives its children's records
--   live           the children started and not ended, as the attempt read them
--   left           the children left to start after these
--   job...         the parent's job, should it be queued again (see hand_off)
--   children...: child  the new children
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step}), A.fence, {'running'})
if not cur then return err end
if cur.step ~= A.step then return stale('run is at step ' .. cur.step) end
redis.call('ZREM', K.leases, A.run_id)
-- the parent outlives its children's records (each child has the parent's TTL from now)
local keep_ms = tonumber(redis.call('HGET', K.run, F.ttl)) + tonumber(A.grace)
local auth = authority_of(K.run)  -- a child is its tree's (tenant, owner...), as use_workflow's is (spawn.lua)
for i, c in ipairs(K.children) do
  local a = A.children[i]
  if redis.call('EXISTS', c.run) == 0 and redis.call('EXISTS', c.summary) == 0 then
    start_child(c, a, A.run_id, A.step, A.now, A.maxlen, A.retention, auth, K.outbox, K.queues, K)
    redis.call('SADD', K.fanout, a.run_id)
    redis.call('HSET', K.journal, a.check_field, a.check_entry)
    xadd_run(K.run, K.events, A.maxlen, 'child.started', a.parent_event)
  end
end
redis.call('HSET', K.run, F.fl, A.left, F.crashes, 0, F.updated, A.now)
if redis.call('SCARD', K.fanout) < tonumber(A.live) + #A.children then
  queue_parent(K, A.run_id, A.step, A.now, A.retention, K.queues, A.job)
  expire_all(keep_ms, {K.fanout})
  return {'queued', redis.call('HGET', K.run, F.fence)}
end
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
redis.call('HSET', K.run, F.status, V.waiting, F.waiting, V.children, F.expires, '',
  F.until_ms, tonumber(A.now) + keep_ms)
expire_all(keep_ms, {K.run, K.journal, K.state, K.events, K.snapshots, K.fanout})
keep_summary(K.summary, keep_ms, A.retention)
return {V.waiting, fence}
