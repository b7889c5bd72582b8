-- A queued run whose job was lost before it began: move it to a new fence (so the lost job,
-- should it ever run, is stale) and a new outbox entry.
-- KEYS
--   run            the run's hash
--   outbox         the outbox
-- ARGV
--   run_id         the run
--   step           its step, as the lost job had it
--   fence          its fence, as the lost job had it
--   now            ms
--   member         the lost job's outbox member
redis.call('ZREM', K.outbox, A.member)
local cur = redis.call('HMGET', K.run, 'status', 'step', 'fence')
if cur[1] ~= 'queued' or cur[2] ~= A.step or cur[3] ~= A.fence then return {'gone'} end
local fence = redis.call('HINCRBY', K.run, 'fence', 1)
redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, cur[2], fence))
return {'requeued', cur[2], fence}
