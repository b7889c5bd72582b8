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
-- A lease a resume took for the attempt it began (format 3: the run hash's `rb` is this fence, see
-- begin_at_resume in _resume.lua) is taken over only by the worker that popped that resume's queue
-- element (`taking`: it begins the old way when the element's lease has too little left); any other
-- copy of the job finds it live and is refused. A begin drops `rb`: a lapse of its lease is then a
-- lost attempt like any other (recover.lua).
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
--   taking         1 when the job is a resume's begun queue element, taken the old way (else '')

-- the run's fields the attempt reads (RUN_FIELDS, from layout.py), read with the fence's check, '~0'
-- (whether events are folded: see fold_fields) and 'fresh' (no attempt has begun and nothing is in its
-- journal: create_run writes it, the first begin drops it)
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step, unpack(RUN_FIELDS), F.folded_first, F.fresh,
  F.rb}),
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
-- begun by its resume (which counted the attempt and wrote node.started): this is that attempt
local resumed = at.status == 'running' and A.taking == '1' and at.rb == A.fence
if at.status == 'running' then
  local lease = redis.call('ZSCORE', K.leases, A.run_id)
  if lease and tonumber(lease) > tonumber(A.now) and not resumed then
    return stale('another attempt holds the lease of this activation')
  end
end
if at.rb then redis.call('HDEL', K.run, F.rb) end
if at.fresh == '1' then
  redis.call('HSET', K.run, F.status, 'running', F.updated, A.now)
  redis.call('HDEL', K.run, F.fresh)  -- (absent reads as spent: no field kept for it)
else
  redis.call('HSET', K.run, F.status, 'running', F.updated, A.now)
end
at.status, at.updated = 'running', A.now
redis.call('ZADD', K.leases, A.lease_until, A.run_id)
redis.call('ZREM', K.outbox, member)
if not resumed then redis.call('HINCRBY', K.metrics, F.attempts, 1) end
-- (a run's first attempt has nothing to read: no journal yet)
local entries = at.fresh == '1' and {} or redis.call('HGETALL', journal)
if resumed then return {attempt_fields(K.run, at), entries} end
local started = started_blob(at.node, step, #entries > 0)
unfold(K.run, K.events, at.folded_first, at.wf, at.input)
-- a stream that is gone (evicted, or deleted by hand) is made again under the records' remaining life,
-- never without a TTL; one that is there keeps its own
if not redis.call('XADD', K.events, 'NOMKSTREAM', 'MAXLEN', '~', A.maxlen, '*', 't', 'node.started', 'd', started) then
  xadd(K.events, A.maxlen, 'node.started', started)
  redis.call('PEXPIRE', K.events, records_left(K.run))
end
return {attempt_fields(K.run, at), entries}
