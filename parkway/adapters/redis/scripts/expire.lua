-- Record the expiry of an interrupt past its TTL: mark it, unindex it and apply its policy to the
-- run that waited on it. 'expire' (the default) and 'fail' end the run (interrupt.expired, then
-- run.failed for 'fail', and done); 'cancel' and 'answer' write the journal entry a cancel or an
-- answer would have written and queue the run at a new fence, so the node replays (its outbox
-- entry is the caller's to enqueue, and the reconciler's if that is lost); 'timer' (use_first) does
-- the same with the timer's win, and records the interrupt cancelled (its token then answers nothing).
-- An interrupt still pending before the run's `expires` at `now` is left alone; a member whose
-- expiry is not the run's (`expires`: the run moved on) is only removed.
-- KEYS
--   run            the run's hash
--   events         its stream
--   summary        its summary
--   newest         the workflow's index newest (its member leaves its buckets too: ix_rem)
--   expiring       its index expiring
--   journal        the journal of the interrupt's step
--   state          the workflow state
--   outbox         the outbox
--   metrics        the counters
--   closing: closing  the closed index of the interrupt's new status (expired, or cancelled for
--                  a timer)
--   notice: notice  the notification stream (see notice in _common.lua)
--   filters...     the interrupt's filter indexes
--   parent?: parent  where the run's end goes, for a child run (see notify_parent)
-- ARGV
--   #filters       how many filter indexes
--   #parent        1 for a child run that this expiry ends, else 0
--   request_id     the interrupt
--   now            ms
--   member_newest  its member in the index newest (and the filter indexes)
--   member_expiring  its member in the index expiring
--   retention      ms the summary outlives the records
--   maxlen         the stream's cap
--   expired_event  the interrupt.expired blob
--   done           the done blob
--   action         expire | fail | cancel | answer | timer
--   field          the journal field of the interrupt
--   entry          the journal entry blob ('' unless cancel, answer or timer)
--   error          the error blob ('' unless fail)
--   failed_event   the run.failed blob ('' unless fail)
--   run_id         the run
--   status_field   the interrupt's status field
--   expires        ms it expires at, as read
--   closing: closing  its lifecycle record's end
--   parent?: parent  the parent's (see notify_parent)
local state = hmget(K.run, {A.status_field, F.expires})
local current = state.expires == A.expires
if current and state[A.status_field] == 'pending' and tonumber(A.now) < (tonumber(state.expires) or 0) then return {'pending'} end
ix_rem(K.newest, A.member_newest)
ix_rem(K.expiring, A.member_expiring)
for _, index in ipairs(K.filters) do ix_rem(index, A.member_newest) end
if state[A.status_field] ~= 'pending' or not current then return {'gone'} end
redis.call('HSET', K.run, A.status_field, A.action == 'timer' and 'cancelled' or 'expired')
write_closing(K.summary, K.closing, A.closing)
local cur = hmget(K.run, {F.status, F.waiting, F.step, F.wf})
notice(K.notice, A.action == 'timer' and 'cancelled' or 'expired', A.run_id, A.request_id, cur.wf or '', A.expires)
if cur.status ~= V.waiting or full_request_id(cur.waiting, A.run_id) ~= A.request_id then return {'expired', ''} end
local action = A.action
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
xadd_run(K.run, K.events, A.maxlen, 'interrupt.expired', A.expired_event)
if action == 'cancel' or action == 'answer' or action == 'timer' then
  redis.call('HSET', K.journal, A.field, A.entry)
  local ttl = redis.call('HGET', K.run, F.ttl)
  redis.call('HSET', K.run, F.status, 'queued', F.waiting, '', F.expires, '', F.updated, A.now,
    F.until_ms, tonumber(A.now) + tonumber(ttl))
  redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, cur.step, fence))
  expire_all(ttl, {K.run, K.events, K.journal, K.state})
  keep_summary(K.summary, ttl, A.retention)
  return {'expired', action, cur.step, fence}
end
local status = 'expired'
if action == 'fail' then
  status = 'failed'
  redis.call('HSET', K.run, F.error, A.error)
  xadd_run(K.run, K.events, A.maxlen, 'run.failed', A.failed_event)
end
redis.call('HSET', K.run, F.status, status, F.waiting, '', F.updated, A.now)
redis.call('HSET', K.summary, F.status, status, F.updated, A.now)
redis.call('HINCRBY', K.metrics, P.runs .. status .. ':' .. (cur.wf or ''), 1)
keep_summary(K.summary, records_left(K.run), A.retention)
xadd_run(K.run, K.events, A.maxlen, 'done', A.done)
notify_parent(K.parent, A.parent)
return {'expired', action, cur.step, fence}
