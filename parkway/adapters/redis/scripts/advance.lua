-- Commit a completed node: merge data, go to the next node (same job, same lease) or finish.
-- KEYS
--   run            the run's hash
--   journal        the journal of the step ('' = its attempts wrote none: nothing to delete)
--   state          the workflow state
--   events         the run's stream
--   summary        the run's summary
--   leases         the leases
--   metrics        the counters
--   snapshots      the run's snapshots (what fork.lua re-opens a step from)
--   parent?: parent  where the run's end goes, for a child run (see notify_parent)
-- ARGV
--   #emitted       how many values emitted takes
--   #parent        1 for a child run, else 0
--   #counts        how many values counts takes
--   fence          the job's fence
--   step           the job's step
--   data           the data blob
--   next_node      the next node ('' = the run ends)
--   output         the output blob
--   now            ms
--   retention      ms the summary outlives the records
--   maxlen         the stream's cap
--   run_id         the run
--   emitted...     the events the step emitted, as (event type, event blob) pairs
--   counts...      the counters to bump, as (field, increment) pairs (see count)
--   parent?: parent  the parent's (see notify_parent)
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step, F.node, F.ttl, F.folded_first, F.until_ms, F.wf, F.input}), A.fence, {'running'})
if not cur then return err end
if cur.step ~= A.step then return stale('run is at step ' .. cur.step) end
local fence = tonumber(cur.fence) + 1
if K.journal ~= '' then redis.call('DEL', K.journal) end
-- the node this step ran, and the data the next step starts with (step 0 starts with the input): the
-- last step of a run that ends needs neither (the run's hash keeps its step and node, which fork reads);
-- the run's own fields are written last, in one HSET with what keep_records says of its records
local ends = A.next_node == ''
local fields
if ends then
  fields = {F.fence, fence, F.data, A.data, F.updated, A.now, F.crashes, 0, F.status, 'completed', F.output, A.output}
  redis.call('HSET', K.summary, F.status, 'completed', F.updated, A.now)
  redis.call('ZREM', K.leases, A.run_id)
else
  redis.call('HSET', K.snapshots, A.step .. ':node', cur.node, tonumber(A.step) + 1, A.data)
  fields = {F.fence, fence, F.data, A.data, F.updated, A.now, F.crashes, 0, F.node, A.next_node,
    F.step, tonumber(A.step) + 1}
end
count(K.metrics, A.counts)
local folded = cur.folded_first
for i = 1, #A.emitted, 2 do
  xadd_run(K.run, K.events, A.maxlen, A.emitted[i], A.emitted[i + 1], folded, cur.wf, cur.input)
  folded = false
end
local left, renewed, known = keep_records(K.run, cur.ttl, {K.run, K.state, K.events, K.snapshots}, K.summary,
  A.retention, A.now, cur.until_ms)
if known then fields[#fields + 1], fields[#fields + 2] = F.until_ms, known end
redis.call('HSET', K.run, unpack(fields))
-- the snapshots are created by the advance of step 0 to step 1 (a fork is a new run: it starts at step 0)
if not renewed and not ends and A.step == '0' then redis.call('PEXPIRE', K.snapshots, left) end
if ends then notify_parent(K.parent, A.parent) end  -- last: a fan-out's child's records go there
return fence
