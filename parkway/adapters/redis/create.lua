-- Create a queued run with its summary, first events and outbox entry (see create_run).
-- KEYS
--   new: new_run   the run
--   queues...      its first job's queues (see hand_off)
-- ARGV
--   new: new_run   the run
--   authority      whose it is (`tenant=<id> owner=<id> origin=<rank>`, see authority_arg)
--   job...         its first job (see hand_off)
local handed = create_run(K.new, A.new, K.queues, A.job, authority_arg(A.authority))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
return handed
