-- Record the expiry of an interrupt past its TTL: mark it, unindex it and apply its policy to the
-- run that waited on it. 'expire' (the default) and 'fail' end the run (interrupt.expired, then
-- run.failed for 'fail', and done); 'cancel' and 'answer' write the journal entry a cancel or an
-- answer would have written and queue the run at a new fence, so the node replays (its outbox
-- entry is the caller's to enqueue, and the reconciler's if that is lost); 'timer' (use_first) does
-- the same with the timer's win, and records the interrupt cancelled (its token then answers nothing).
-- An interrupt still pending before the run's `expires` at `now` is left alone; a member whose
-- expiry is not the run's (`expires at`: the run moved on) is only removed.
-- KEYS: 1 run, 2 events, 3 summary, 4 the workflow's index newest, 5 its index expiring,
--       6 journal of the interrupt's step, 7 workflow state, 8 outbox, 9 metrics,
--       10 the workflow's index of closed interrupts of the interrupt's new status (expired, or
--       cancelled for a timer), 11... ARGV[17] filter indexes of the interrupt, then the parent's (see
--       notify_parent)
-- ARGV: 1 request id, 2 now, 3 member newest, 4 member expiring, 5 retention ms, 6 maxlen,
--       7 interrupt.expired blob, 8 done blob, 9 action (expire | fail | cancel | answer | timer),
--       10 journal field, 11 journal entry blob ('' unless cancel/answer/timer), 12 error blob ('' unless fail),
--       13 run.failed blob ('' unless fail), 14 run id, 15 status field, 16 expires at,
--       17 number of filter indexes, 18 the lifecycle field of its end in the summary (e:<req>), 19 its
--       blob, 20 the closed index member, 21 the oldest end time the closed index keeps, 22 the
--       lifecycle record's first part's field (i:<req>), 23 its blob ('' when the run's records are
--       gone), 24... the parent's (see notify_parent)
local state = redis.call('HMGET', KEYS[1], ARGV[15], 'expires')
local current = state[2] == ARGV[16]
if current and state[1] == 'pending' and tonumber(ARGV[2]) < (tonumber(state[2]) or 0) then return {'pending'} end
redis.call('ZREM', KEYS[4], ARGV[3])
redis.call('ZREM', KEYS[5], ARGV[4])
local parent = 11 + tonumber(ARGV[17])  -- the parent's first key
for i = 11, parent - 1 do redis.call('ZREM', KEYS[i], ARGV[3]) end
if state[1] ~= 'pending' or not current then return {'gone'} end
redis.call('HSET', KEYS[1], ARGV[15], ARGV[9] == 'timer' and 'cancelled' or 'expired')
hset_parts(KEYS[3], ARGV[18], ARGV[19])
if ARGV[23] ~= '' then hset_parts(KEYS[3], ARGV[22], ARGV[23]) end
redis.call('ZADD', KEYS[10], 0, ARGV[20])
redis.call('ZREMRANGEBYLEX', KEYS[10], '-', '(' .. ARGV[21])
local cur = redis.call('HMGET', KEYS[1], 'status', 'waiting', 'step')
if cur[1] ~= 'waiting' or cur[2] ~= ARGV[1] then return {'expired', ''} end
local action = ARGV[9]
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
xadd_run(KEYS[1], KEYS[2], ARGV[6], 'interrupt.expired', ARGV[7])
if action == 'cancel' or action == 'answer' or action == 'timer' then
  redis.call('HSET', KEYS[6], ARGV[10], ARGV[11])
  redis.call('HSET', KEYS[1], 'status', 'queued', 'waiting', '', 'expires', '', 'updated', ARGV[2])
  redis.call('ZADD', KEYS[8], ARGV[2], ARGV[14] .. ':' .. cur[3] .. ':' .. fence)
  local ttl = redis.call('HGET', KEYS[1], 'ttl')
  expire_all(ttl, {KEYS[1], KEYS[2], KEYS[6], KEYS[7]})
  keep_summary(KEYS[3], ttl, ARGV[5])
  return {'expired', action, cur[3], fence}
end
local status = 'expired'
if action == 'fail' then
  status = 'failed'
  redis.call('HSET', KEYS[1], 'error', ARGV[12])
  xadd_run(KEYS[1], KEYS[2], ARGV[6], 'run.failed', ARGV[13])
end
redis.call('HSET', KEYS[1], 'status', status, 'waiting', '', 'updated', ARGV[2])
redis.call('HSET', KEYS[3], 'status', status, 'updated', ARGV[2])
redis.call('HINCRBY', KEYS[9], 'runs:' .. status, 1)
keep_summary(KEYS[3], records_left(KEYS[1]), ARGV[5])
xadd_run(KEYS[1], KEYS[2], ARGV[6], 'done', ARGV[8])
notify_parent(parent, 24)
return {'expired', action, cur[3], fence}
