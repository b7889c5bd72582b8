-- End a queued or running run (or a session's branch run held on its parked branch, or a run
-- waiting on a child run, on its fan-out's children, or on an interrupt past its deadline) as
-- failed or cancelled. A parent ended while it waits on a child is ended
-- first, before its child: the child's end then finds it finished and queues nothing (cancel wins).
-- A run failed in the activation whose interrupt was last answered (its replay with the answer
-- failed): that interrupt's lifecycle record says so (its x: field in the summary, which the run's
-- 'ans' names).
-- KEYS
--   run            the run's hash
--   state          the workflow state
--   events         its stream
--   summary        its summary
--   leases         the leases
--   metrics        the counters
--   parent?: parent  where the run's end goes, for a child run (see notify_parent)
-- ARGV
--   #parent        1 for a child run, else 0
--   fence          the job's fence ('' = whatever is current)
--   status         failed | cancelled
--   error          the error blob ('' = none)
--   now            ms
--   retention      ms the summary outlives the records
--   maxlen         the stream's cap
--   event_type     the event's type
--   event          its blob
--   done           the done blob
--   run_id         the run
--   failed_replay  the failed replay's lifecycle blob with the error's message ('' unless failed)
--   failed_type    the same with the error's type only (for an interrupt whose output is not captured)
--   parent?: parent  the parent's (see notify_parent)
local cur = redis.call('HMGET', K.run, 'fence', 'status', 'waiting', 'expires', 'wf')
if not cur[1] then return gone() end
if A.fence ~= '' and cur[1] ~= A.fence then return stale('run is at fence ' .. cur[1]) end
local waiting = cur[2] == 'waiting' and (cur[3] or '') or ''
-- a run waiting on an interrupt past its deadline, its policy not yet applied (the reconciler
-- then records the interrupt expired and, the run no longer waiting on it, moves nothing)
local overdue = waiting ~= '' and tonumber(A.now) >= (tonumber(cur[4]) or math.huge)
if cur[2] ~= 'queued' and cur[2] ~= 'running' and waiting ~= 'session' and waiting ~= 'children'
    and string.sub(waiting, 1, 6) ~= 'child:' and not overdue then
  return stale('run is ' .. cur[2])
end
redis.call('HINCRBY', K.run, 'fence', 1)
if A.status == 'failed' and A.failed_replay ~= '' then
  local answered = redis.call('HMGET', K.run, 'ans', 'step')
  if answered[1] then
    local step, field, output = string.match(answered[1], '^(%d+) (%S+) (%d)$')
    if step == answered[2] then hset_parts(K.summary, field, output == '1' and A.failed_replay or A.failed_type) end
  end
end
local ttl = redis.call('HGET', K.run, 'ttl')
redis.call('HSET', K.run, 'status', A.status, 'updated', A.now, 'until', tonumber(A.now) + tonumber(ttl))
if A.error ~= '' then redis.call('HSET', K.run, 'error', A.error) end
redis.call('HSET', K.summary, 'status', A.status, 'updated', A.now)
redis.call('ZREM', K.leases, A.run_id)
redis.call('HINCRBY', K.metrics, 'runs:' .. A.status .. ':' .. (cur[5] or ''), 1)
-- a node's error (not a cancellation): a failed attempt, as each retried one is (write_entry.lua's counts)
if A.status == 'failed' and A.error ~= '' then redis.call('HINCRBY', K.metrics, 'failures:' .. (cur[5] or ''), 1) end
xadd_run(K.run, K.events, A.maxlen, A.event_type, A.event)
xadd_run(K.run, K.events, A.maxlen, 'done', A.done)
expire_all(ttl, {K.run, K.state, K.events})
keep_summary(K.summary, ttl, A.retention)
notify_parent(K.parent, A.parent)
return 1
