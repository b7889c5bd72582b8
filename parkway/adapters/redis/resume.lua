-- Answer (or cancel) an interrupt exactly once: release the pending key, record the answer,
-- bump the fence, write the outbox, unindex, publish the event. Deleting KEYS[3] is the
-- exactly-once point: of N concurrent calls, only one finds it.
-- KEYS: 1 run, 2 interrupts, 3 pending, 4 journal, 5 workflow state, 6 events, 7 summary,
--       8 outbox, 9 index newest, 10 index expiring, 11 index newest of workflow,
--       12 index expiring of workflow, 13 metrics, 14-15 the next job's queues (see hand_off)
-- ARGV: 1 token hash, 2 expected request id ('' = any), 3 journal field, 4 entry blob,
--       5 event blob, 6 now, 7 member newest, 8 member expiring, 9 run id, 10 maxlen,
--       11 new interrupt status (resolved | cancelled), 12 event type, 13 retention ms,
--       14 wait buckets (upper bounds in seconds, ascending, space-separated), 15... the next job (see hand_off)
local req = redis.call('HGET', KEYS[2], 't:' .. ARGV[1])
if not req then
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[7]) == 1 then return {'expired'} end
  return {'unknown'}
end
if ARGV[2] ~= '' and ARGV[2] ~= req then return {'mismatch', req} end
if redis.call('DEL', KEYS[3]) == 0 then
  if redis.call('HGET', KEYS[2], 's:' .. req) == 'pending' then return {'expired', req} end
  return {'already_resolved', req}
end
redis.call('HSET', KEYS[2], 's:' .. req, ARGV[11])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[4])
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
local step = redis.call('HGET', KEYS[1], 'step')
redis.call('HSET', KEYS[1], 'status', 'queued', 'waiting', '', 'expires', '', 'updated', ARGV[6])
redis.call('ZADD', KEYS[8], ARGV[6], ARGV[9] .. ':' .. step .. ':' .. fence)
redis.call('ZREM', KEYS[9], ARGV[7])
redis.call('ZREM', KEYS[10], ARGV[8])
redis.call('ZREM', KEYS[11], ARGV[7])
redis.call('ZREM', KEYS[12], ARGV[8])
xadd(KEYS[6], ARGV[10], ARGV[12], ARGV[5])
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[2], KEYS[4], KEYS[5], KEYS[6]})
keep_summary(KEYS[7], ttl, ARGV[13])
-- the wait, from the interrupt's creation (the newest member opens with its 13-digit epoch ms)
local waited = math.max(0, tonumber(ARGV[6]) - tonumber(string.sub(ARGV[7], 1, 13)))
local bucket = '+Inf'
for bound in string.gmatch(ARGV[14], '%S+') do
  if waited <= tonumber(bound) * 1000 then bucket = bound break end
end
redis.call('HINCRBY', KEYS[13], 'resumes:accepted', 1)
redis.call('HINCRBY', KEYS[13], 'wait:' .. bucket, 1)
redis.call('HINCRBY', KEYS[13], 'wait:sum_ms', waited)
return {'accepted', req, step, fence, hand_off({KEYS[14], KEYS[15]}, ARGV, 15, step, fence)}
