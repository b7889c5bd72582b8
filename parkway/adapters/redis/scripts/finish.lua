-- End a queued or running run (or a session's branch run held on its parked branch, or a run
-- waiting on a child run, on its fan-out's children, or on an interrupt past its deadline) as
-- failed or cancelled. A parent ended while it waits on a child is ended
-- first, before its child: the child's end then finds it finished and queues nothing (cancel wins).
-- The runs below it that the caller names (its tree below it, read after the run's fence: each a
-- child of its fan-out, the child it waits on or the child racing its interrupt, of the run or of
-- one below it, parents first) end in the same step when their parent ends here and they are
-- queued, running or waiting on runs below them: between the two no run of the tree begins a node
-- or commits one, whatever the run was doing (queued or running between two children of its
-- fan-out, or waiting on them). Each run that ends here must have all the runs below it named (a
-- child started since the caller's read: refused, to read the tree again). Runs waiting on an
-- interrupt, and the runs below them, are the caller's next steps (runtime/cancel.py).
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
--   fanout         its fan-out set
--   parent?: parent  where the run's end goes, for a child run (see notify_parent)
--   below...: below  the runs below it, parents first
-- ARGV
--   #parent        1 for a child run, else 0
--   #below         how many runs below it
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
--   below...: below  theirs

-- End one run (`run`, `state`, `events`, `summary`: its keys) with this call's status, event and
-- done event: a new fence (its job's commit is refused), its lease released, counted.
local function end_run(run, state, events, summary, run_id, wf)
  redis.call('HINCRBY', run, F.fence, 1)
  local ttl = redis.call('HGET', run, F.ttl)
  redis.call('HSET', run, F.status, A.status, F.updated, A.now, F.until_ms, tonumber(A.now) + tonumber(ttl))
  redis.call('HSET', summary, F.status, A.status, F.updated, A.now)
  redis.call('ZREM', K.leases, run_id)
  redis.call('HINCRBY', K.metrics, P.runs .. A.status .. ':' .. (wf or ''), 1)
  xadd_run(run, events, A.maxlen, A.event_type, A.event)
  xadd_run(run, events, A.maxlen, 'done', A.done)
  expire_all(ttl, {run, state, events})
  keep_summary(summary, ttl, A.retention)
end

local cur = hmget(K.run, {F.fence, F.status, F.waiting, F.expires, F.wf})
if not cur.fence then return gone() end
if A.fence ~= '' and cur.fence ~= A.fence then return stale('run is at fence ' .. cur.fence) end
local waiting = cur.status == V.waiting and (cur.waiting or '') or ''
-- a run waiting on an interrupt past its deadline, its policy not yet applied (the reconciler
-- then records the interrupt expired and, the run no longer waiting on it, moves nothing)
local overdue = waiting ~= '' and tonumber(A.now) >= (tonumber(cur.expires) or math.huge)
if cur.status ~= 'queued' and cur.status ~= 'running' and waiting ~= V.session and waiting ~= V.children
    and string.sub(waiting, 1, 6) ~= 'child:' and not overdue then
  return stale('run is ' .. cur.status)
end
-- the runs below that end with it, checked before anything changes: {keys, arguments, workflow}
local named, ends, sets, below = {}, {[A.run_id] = true}, {[A.run_id] = K.fanout}, {}
for _, a in ipairs(A.below) do named[a.run_id] = true end
for i, b in ipairs(K.below) do
  local a = A.below[i]
  local run = hmget(b.run, {F.status, F.parent, F.wf, F.waiting, F.rc})
  local on = run.status == V.waiting and (run.waiting or '') or ''
  local child = string.sub(on, 1, #V.child) == V.child and string.sub(on, #V.child + 1) or nil
  if ends[a.parent] and run.parent == a.parent
      and (run.status == 'queued' or run.status == 'running' or on == V.children or child) then
    for _, c in ipairs(redis.call('SMEMBERS', b.fanout)) do
      if not named[c] then return stale('run ' .. a.run_id .. ' started ' .. c .. ' since the read') end
    end
    for _, c in ipairs({child or '', run.rc or ''}) do
      if c ~= '' and not named[c] then return stale('run ' .. a.run_id .. ' started ' .. c .. ' since the read') end
    end
    ends[a.run_id], sets[a.run_id] = true, b.fanout
    below[#below + 1] = {k = b, a = a, wf = run.wf}
  end
end
if A.status == 'failed' and A.failed_replay ~= '' then
  local answered = hmget(K.run, {F.ans, F.step})
  if answered.ans then
    local step, field, output = string.match(answered.ans, '^(%d+) (%S+) (%d)$')
    if step == answered.step then hset_parts(K.summary, field, output == '1' and A.failed_replay or A.failed_type) end
  end
end
if A.error ~= '' then redis.call('HSET', K.run, F.error, A.error) end
end_run(K.run, K.state, K.events, K.summary, A.run_id, cur.wf)
-- a node's error (not a cancellation): a failed attempt, as each retried one is (write_entry.lua's counts)
if A.status == 'failed' and A.error ~= '' then redis.call('HINCRBY', K.metrics, P.failures .. (cur.wf or ''), 1) end
for _, r in ipairs(below) do
  local b, a = r.k, r.a
  end_run(b.run, b.state, b.events, b.summary, a.run_id, r.wf)
  redis.call('SREM', sets[a.parent], a.run_id)  -- ended: no longer a live child of its fan-out
end
notify_parent(K.parent, A.parent)
return 1
