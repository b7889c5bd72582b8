-- Answer (or cancel) an interrupt exactly once: flip its status from pending, record the answer,
-- bump the fence, write the outbox, unindex, publish the event. The status field in the run hash
-- is the exactly-once point: of N concurrent calls, only the first finds it pending (scripts run
-- one at a time); an interrupt past the run's `expires` at `now` can no longer be answered.
-- An interrupt escalated since the caller read it (its expiry is not ARGV 17's) gets 'moved': the
-- caller reads it again (its filter indexes changed) and retries.
-- KEYS: 1 run, 2 journal, 3 workflow state, 4 events, 5 summary, 6 outbox, 7 the workflow's index newest,
--       8 its index expiring, 9 metrics, 10 the workflow's index of closed interrupts of the new
--       status, 11... ARGV[18] filter indexes, then the next job's queues (see hand_off)
-- ARGV: 1 token field, 2 expected request id as the run hash names it (keys.held_id; '' = any), 3 journal field, 4 entry blob,
--       5 event blob, 6 now, 7 member newest, 8 member expiring, 9 run id, 10 maxlen,
--       11 new interrupt status (resolved | cancelled), 12 event type, 13 retention ms,
--       14 wait buckets (upper bounds in seconds, ascending, space-separated), 15 prefix of the status
--       field, 16 created at (ms), 17 expires at (ms) as read, 18 number of filter indexes,
--       19 the lifecycle field of its end in the summary (e:<req>), 20 its blob, 21 the closed index
--       member, 22 the oldest end time the closed index keeps (6 bytes, as members start), 23 the
--       lifecycle record's first part's field (i:<req>), 24 its blob (written now, with the end:
--       while open, the run's record says it), 25 the run's 'ans' ("<step> <the x: field of its
--       lifecycle record> <1 | 0: the answer's output captured>", for finish.lua; '' for a cancel),
--       26... the next job (see hand_off)
local req = redis.call('HGET', KEYS[1], ARGV[1])
if not req then
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[5]) == 1 then return {'expired'} end
  return {'unknown'}
end
if ARGV[2] ~= '' and ARGV[2] ~= req then return {'mismatch', req} end
local sfield = ARGV[15] .. req
local cur = redis.call('HMGET', KEYS[1], sfield, 'expires', 'step')
if cur[1] ~= 'pending' then
  if cur[1] == 'expired' then return {'expired', req} end
  return {'already_resolved', req}
end
if tonumber(ARGV[6]) >= (tonumber(cur[2]) or 0) then return {'expired', req} end
if cur[2] ~= ARGV[17] then return {'moved', req} end
local hand = 11 + tonumber(ARGV[18])  -- the first of the next job's keys
for i = 11, hand - 1 do redis.call('ZREM', KEYS[i], ARGV[7]) end
local step = cur[3]
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], sfield, ARGV[11], 'status', 'queued', 'waiting', '', 'expires', '', 'updated', ARGV[6])
redis.call('ZADD', KEYS[6], ARGV[6], ARGV[9] .. ':' .. step .. ':' .. fence)
redis.call('ZREM', KEYS[7], ARGV[7])
redis.call('ZREM', KEYS[8], ARGV[8])
xadd_run(KEYS[1], KEYS[4], ARGV[10], ARGV[12], ARGV[5])
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4]})
keep_summary(KEYS[5], ttl, ARGV[13])
-- the wait, from the interrupt's creation
local waited = math.max(0, tonumber(ARGV[6]) - tonumber(ARGV[16]))
local bucket = '+Inf'
for bound in string.gmatch(ARGV[14], '%S+') do
  if waited <= tonumber(bound) * 1000 then bucket = bound break end
end
redis.call('HINCRBY', KEYS[9], 'resumes:accepted', 1)
redis.call('HINCRBY', KEYS[9], 'wait:' .. bucket, 1)
redis.call('HINCRBY', KEYS[9], 'wait:sum_ms', waited)
-- the lifecycle record: how it ended, and its place among the workflow's closed interrupts
hset_parts(KEYS[5], ARGV[19], ARGV[20])
if ARGV[24] ~= '' then hset_parts(KEYS[5], ARGV[23], ARGV[24]) end
redis.call('ZADD', KEYS[10], 0, ARGV[21])
redis.call('ZREMRANGEBYLEX', KEYS[10], '-', '(' .. ARGV[22])
if ARGV[25] ~= '' then redis.call('HSET', KEYS[1], 'ans', ARGV[25]) end
return {'accepted', req, step, fence, hand_off({KEYS[hand], KEYS[hand + 1]}, ARGV, 26, step, fence)}
