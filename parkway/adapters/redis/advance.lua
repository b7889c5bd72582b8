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
local cur, err = check_fence(K.run, A.fence, {'running'}, {'node', 'ttl', '~0', 'until', 'wf', 'input'})
if not cur then return err end
if cur[3] ~= A.step then return stale('run is at step ' .. cur[3]) end
local fence = tonumber(cur[1]) + 1
if K.journal ~= '' then redis.call('DEL', K.journal) end
-- the node this step ran, and the data the next step starts with (step 0 starts with the input): the
-- last step of a run that ends needs neither (the run's hash keeps its step and node, which fork reads);
-- the run's own fields are written last, in one HSET with what keep_records says of its records
local ends = A.next_node == ''
local fields = {'fence', fence, 'data', A.data, 'updated', A.now, 'crashes', 0}
if ends then
  fields[9], fields[10], fields[11], fields[12] = 'status', 'completed', 'output', A.output
  redis.call('HSET', K.summary, 'status', 'completed', 'updated', A.now)
  redis.call('ZREM', K.leases, A.run_id)
else
  redis.call('HSET', K.snapshots, A.step .. ':node', cur[4], tonumber(A.step) + 1, A.data)
  fields[9], fields[10], fields[11], fields[12] = 'node', A.next_node, 'step', tonumber(A.step) + 1
end
count(K.metrics, A.counts)
local folded = cur[6]
for i = 1, #A.emitted, 2 do
  xadd_run(K.run, K.events, A.maxlen, A.emitted[i], A.emitted[i + 1], folded, cur[8], cur[9])
  folded = false
end
local left, renewed, known = keep_records(K.run, cur[5], {K.run, K.state, K.events, K.snapshots}, K.summary,
  A.retention, A.now, cur[7])
if known then fields[#fields + 1], fields[#fields + 2] = 'until', known end
redis.call('HSET', K.run, unpack(fields))
-- the snapshots are created by the advance of step 0 to step 1 (a fork is a new run: it starts at step 0)
if not renewed and not ends and A.step == '0' then redis.call('PEXPIRE', K.snapshots, left) end
if ends then notify_parent(K.parent, A.parent) end  -- last: a fan-out's child's records go there
return fence
