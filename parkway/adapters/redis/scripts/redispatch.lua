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
local cur = hmget(K.run, {F.status, F.step, F.fence})
if cur.status ~= 'queued' or cur.step ~= A.step or cur.fence ~= A.fence then return {'gone'} end
local fence = redis.call('HINCRBY', K.run, F.fence, 1)
redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, cur.step, fence))
return {'requeued', cur.step, fence}
