-- Escalate an interrupt past its TTL: ask the same question again, under the same token, of
-- another audience with a new expiry. The interrupt stays pending; its expiry (the run's `expires`),
-- its record (new expiry, audience and remaining policy) and its index members move, and the run's
-- stream gets interrupt.expired (saying it escalated) and then a fresh interrupt event.
-- Exactly once against a racing resume: this script acts only on an interrupt still pending at
-- the expiry the caller read (`expires`), past it at `now`; a resume that read the old expiry
-- gets 'moved' from resume.lua and answers the escalated one (see resume.lua).
-- Returns {'pending'}, {'gone'} (resolved, expired, or moved on: old members only removed) or
-- {'escalated', fence}.
-- KEYS
--   run            the run's hash
--   events         its stream
--   summary        its summary
--   newest         the workflow's index newest (its member leaves its buckets too: ix_rem)
--   expiring       its index expiring
--   journal        the journal of the interrupt's step
--   state          the workflow state
--   pauses         the pause feed
--   snapshots      the run's snapshots (see advance.lua), kept as long as the run
--   notice: notice  the notification stream (see notice in _common.lua)
--   left...        the filter indexes the interrupt leaves
--   joined...      the filter indexes it joins
--   ancestors...: ancestor  a child run's ancestors (see park.lua)
-- ARGV
--   #left          how many filter indexes it leaves
--   #joined        how many it joins
--   #ancestors     how many ancestors
--   #record        how many values the record takes
--   request_id     the interrupt
--   short_id       the interrupt as the run hash names it (layout.short_id)
--   now            ms
--   member_newest  its member in the index newest (and the filter indexes)
--   member_expiring  its member in the index expiring
--   new_member_newest  its new member in the index newest (and the filter indexes)
--   new_member_expiring  its new member in the index expiring
--   buckets        '1': index the new members in buckets (format 4: ix_add), '': in the single zsets
--   status_field   its status field
--   expires        ms it expires at, as read
--   new_expires    ms it expires at now
--   maxlen         the streams' cap
--   expired_event  the interrupt.expired blob
--   event          the interrupt event blob
--   ttl            ms the interrupt is open again
--   grace          ms the records outlive it
--   retention      ms the summary outlives the records
--   workflow       the workflow
--   pauses_maxlen  the pause feed's cap
--   run_id         the run
--   record...      the record's fields as pairs (see park.lua)
local state = hmget(K.run, {A.status_field, F.expires, F.status, F.waiting, F.rq, F.rn})
local current = state.expires == A.expires
if current and state[A.status_field] == 'pending' and tonumber(A.now) < (tonumber(state.expires) or 0) then return {'pending'} end
ix_rem(K.newest, A.member_newest)
ix_rem(K.expiring, A.member_expiring)
for _, index in ipairs(K.left) do ix_rem(index, A.member_newest) end
if not current or state[A.status_field] ~= 'pending' or state.status ~= V.waiting or full_request_id(state.waiting, A.run_id) ~= A.request_id
    or state.rq ~= A.short_id then
  return {'gone'}
end
local bucketed = bucketed_arg(A.buckets)
ix_add(K.newest, A.new_member_newest, bucketed)
ix_add(K.expiring, A.new_member_expiring, bucketed)
for _, index in ipairs(K.joined) do ix_add(index, A.new_member_newest, bucketed) end
for i = 0, tonumber(state.rn) - 1 do redis.call('HDEL', K.run, P.record .. i) end
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
local keep_ms = tonumber(A.ttl) + tonumber(A.grace)
redis.call('HSET', K.run, F.expires, A.new_expires, F.updated, A.now, F.until_ms, tonumber(A.now) + keep_ms,
  unpack(A.record))
xadd_run(K.run, K.events, A.maxlen, 'interrupt.expired', A.expired_event)
xadd_run(K.run, K.events, A.maxlen, 'interrupt', A.event)
for _, a in ipairs(K.ancestors) do xadd_run(a.run, a.events, A.maxlen, 'interrupt', A.event) end
local born = hmget(K.run, {F.created, F.cr, F.tenant})
redis.call('XADD', K.pauses, 'MAXLEN', '~', A.pauses_maxlen, '*', 'w', A.workflow, 'r', A.run_id,
  'c', born.created or born.cr or '', 't', born.tenant or '')  -- `c`, `t`: see _park.lua
expire_all(keep_ms, {K.run, K.events, K.journal, K.state, K.snapshots})
keep_summary(K.summary, keep_ms, A.retention)
keep_ancestors(K.ancestors, keep_ms, A.retention)
notice(K.notice, 'escalated', A.run_id, A.request_id, A.workflow, A.new_expires)
return {'escalated', fence}
