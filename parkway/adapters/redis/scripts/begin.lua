-- Begin a node attempt: check the fence, take the lease, drop the outbox entry, mark the
-- run running, write node.started, and return what the attempt needs (the workflow state is read
-- when a node first asks for it: store.LazyState). A run already running at
-- this fence under a live lease belongs to another attempt (a duplicate or re-delivered job):
-- refused as stale, so one activation never runs twice at once. A lapsed lease may be taken over.
-- A job known by its id alone (the run and the fence: parkway's worker does not read the job's
-- hash) gives no step: the run's own is the one its fence stands for (a fence names one
-- activation), and its journal key and outbox member are made here: the journal key is the one
-- key this script names without its KEYS (it is the run key's, with `j:<step>` for `run`: the
-- same hash slot).
-- KEYS
--   run            the run's hash
--   journal        the journal of the step ('' = the step is not given)
--   leases         the leases
--   outbox         the outbox
--   metrics        the counters
--   events         the run's stream
-- ARGV
--   step           the job's step ('' = not given)
--   fence          the job's fence
--   now            ms
--   lease_until    ms the lease lasts until
--   run_id         the run
--   member         the job's outbox member ('' when the step is not given)
--   maxlen         the stream's cap

-- the run's fields the attempt reads (RUN_FIELDS, from layout.py), read with the fence's check, '~0'
-- (whether events are folded: see fold_fields) and 'fresh' (no attempt has begun and nothing is in its
-- journal: create_run writes it, the first begin drops it)
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step, unpack(RUN_FIELDS), F.folded_first, F.fresh}),
  A.fence, {'queued', 'running'})
if not cur then return err end
local refused = format_refused(cur.fmt, A.run_id)  -- a record of a later version's format: left as it is
if refused then return refused end
local at = cur
local step, journal, member = A.step, K.journal, A.member
if step == '' then
  step = at.step
  journal = string.sub(K.run, 1, -4) .. 'j:' .. step
  member = outbox_member(A.run_id, step, A.fence)
end
if at.step ~= step then return stale('run is at step ' .. at.step .. ', the job has ' .. step) end
if at.status == 'running' then
  local lease = redis.call('ZSCORE', K.leases, A.run_id)
  if lease and tonumber(lease) > tonumber(A.now) then
    return stale('another attempt holds the lease of this activation')
  end
end
if at.fresh == '1' then
  redis.call('HSET', K.run, F.status, 'running', F.updated, A.now, F.fresh, '')
else
  redis.call('HSET', K.run, F.status, 'running', F.updated, A.now)
end
at.status, at.updated = 'running', A.now
redis.call('ZADD', K.leases, A.lease_until, A.run_id)
redis.call('ZREM', K.outbox, member)
redis.call('HINCRBY', K.metrics, F.attempts, 1)
-- {node, step, replay}: a replay runs the node again over what its journal holds (an answer, a
-- cancellation, the steps of a lost attempt)
-- (a run's first attempt has nothing to read: no journal yet)
local entries = at.fresh == '1' and {} or redis.call('HGETALL', journal)
local replay = #entries > 0 and '\195' or '\194'
local started = '\131\164node' .. mp_str(at.node or '') .. '\164step' .. mp_uint(step) .. '\166replay' .. replay
unfold(K.run, K.events, at.folded_first, at.wf, at.input)
-- a stream that is gone (evicted, or deleted by hand) is made again under the records' remaining life,
-- never without a TTL; one that is there keeps its own
if not redis.call('XADD', K.events, 'NOMKSTREAM', 'MAXLEN', '~', A.maxlen, '*', 't', 'node.started', 'd', started) then
  xadd(K.events, A.maxlen, 'node.started', started)
  redis.call('PEXPIRE', K.events, records_left(K.run))
end
-- the run's fields as pairs, and the status field `rs` names (a racing interrupt's): not its
-- interrupts' records or tokens
local fields = {}
for _, name in ipairs(RUN_FIELDS) do
  local value = at[FIELD_NAME[name]]
  if value then fields[#fields + 1], fields[#fields + 2] = name, value end
  local racing = name == F.rs and value and value ~= '' and redis.call('HGET', K.run, value)
  if racing then fields[#fields + 1], fields[#fields + 2] = value, racing end
end
return {fields, entries}
