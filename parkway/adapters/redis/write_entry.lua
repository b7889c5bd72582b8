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
--   counts...      the counters to bump, as (field, increment) pairs (see count): a retry's
local cur, err = check_fence(K.run, A.fence, {'running'})
if not cur then return err end
redis.call('HSET', K.target, A.field, A.blob)
if A.event_type ~= '' then xadd_run(K.run, K.events, A.maxlen, A.event_type, A.event) end
count(K.metrics, A.counts)
local left, renewed = keep_records(K.run, redis.call('HGET', K.run, 'ttl'), {K.run, K.journal, K.state, K.events},
  K.summary, A.retention)
if not renewed then redis.call('PEXPIRE', K.target, left) end  -- a step's first entry, the first state
return 1
