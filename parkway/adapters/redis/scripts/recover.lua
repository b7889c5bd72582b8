-- A running run whose lease expired (its worker died or hangs): requeue it for replay on a
-- live worker under a new fence, or fail it after too many lost attempts. A lease a resume took for
-- the attempt it began (the run hash's `rb` is the fence: begin_at_resume in _resume.lua) counts no
-- lost attempt: it ran while the job waited in the queue (a worker popping it late, or dying
-- between its pop and its node, or in that node before a begin of its own). Its requeue goes the
-- old way (a plain job, its begin's lease unmarked), so each resume adds at most one uncounted loss.
-- KEYS
--   run            the run's hash
--   events         its stream
--   outbox         the outbox
--   summary        its summary
--   leases         the leases
--   metrics        the counters
--   parent?: parent  where the run's end goes, for a child run (see notify_parent)
-- ARGV
--   #parent        1 for a child run, else 0
--   run_id         the run
--   now            ms
--   max_lost       the lost attempts that fail the run
--   retention      ms the summary outlives the records
--   maxlen         the stream's cap
--   recovered      the node.recovered blob
--   error          the error blob (when it fails)
--   failed_event   the run.failed blob
--   done           the done blob
--   parent?: parent  the parent's (see notify_parent)
local score = redis.call('ZSCORE', K.leases, A.run_id)
if score and tonumber(score) > tonumber(A.now) then return {'alive'} end
redis.call('ZREM', K.leases, A.run_id)
local cur = hmget(K.run, {F.status, F.step, F.crashes, F.wf, F.fence, F.rb})
if cur.status ~= 'running' then return {'gone'} end
local queued = cur.rb and cur.rb == cur.fence  -- its resume's lease: no attempt of its own was lost
local crashes = tonumber(cur.crashes or '0') + (queued and 0 or 1)
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
if cur.rb then redis.call('HDEL', K.run, F.rb) end
if queued then
  redis.call('HSET', K.run, F.updated, A.now)
else
  redis.call('HSET', K.run, F.crashes, crashes, F.updated, A.now)
end
if not queued and crashes >= tonumber(A.max_lost) then
  redis.call('HSET', K.run, F.status, 'failed', F.error, A.error)
  redis.call('HSET', K.summary, F.status, 'failed', F.updated, A.now)
  keep_summary(K.summary, records_left(K.run), A.retention)
  xadd_run(K.run, K.events, A.maxlen, 'run.failed', A.failed_event)
  redis.call('HINCRBY', K.metrics, P.runs .. V.failed .. ':' .. (cur.wf or ''), 1)
  xadd_run(K.run, K.events, A.maxlen, 'done', A.done)
  notify_parent(K.parent, A.parent)
  return {'failed', cur.step, fence}
end
redis.call('HSET', K.run, F.status, 'queued')
redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, cur.step, fence))
xadd_run(K.run, K.events, A.maxlen, 'node.recovered', A.recovered)
redis.call('HINCRBY', K.metrics, 'recovered', 1)
return {'requeued', cur.step, fence}
