-- Write one journal entry or workflow state value (write-through), maybe with an event, maybe counted.
-- KEYS
--   run            the run's hash
--   target         the hash written: the journal or the workflow state
--   journal        the journal of the step
--   state          the workflow state
--   events         the run's stream
--   summary        the run's summary
--   metrics        the counters
-- ARGV
--   fence          the job's fence
--   field          the field written
--   blob           its value
--   event_type     the event's type ('' for none)
--   event          the event's blob
--   maxlen         the stream's cap
--   retention      ms the summary outlives the records
--   again          1: a repeat of a journal write whose outcome was unknown; a field already there
--                  means the first write landed, so its event and counts are not added again
--   counts...      the counters to bump, as (field, increment) pairs (see count): a retry's
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step}), A.fence, {'running'})
if not cur then return err end
local added = redis.call('HSET', K.target, A.field, A.blob)
if added == 1 or A.again ~= '1' then
  if A.event_type ~= '' then xadd_run(K.run, K.events, A.maxlen, A.event_type, A.event) end
  count(K.metrics, A.counts)
end
local left, renewed = keep_records(K.run, redis.call('HGET', K.run, F.ttl), {K.run, K.journal, K.state, K.events},
  K.summary, A.retention)
if not renewed then redis.call('PEXPIRE', K.target, left) end  -- a step's first entry, the first state
return 1
