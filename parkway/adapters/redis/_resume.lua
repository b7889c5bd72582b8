-- Answer (or cancel) an interrupt exactly once, as two functions over resume.lua's KEYS and ARGV
-- (as K and A), so that the session scripts that deliver an answer run the same transition inside
-- their own (session_answer, session_switch): resume_refused says why the answer cannot be taken
-- (a reply) or nil, writing nothing; resume_commit then takes it (call it only after nil). The run
-- hash's `kept` names an interrupt whose answer its session keeps (session_answer, session_switch).
-- Answering: flip its status from pending, record the answer,
-- bump the fence, write the outbox, unindex, publish the event. The status field in the run hash
-- is the exactly-once point: of N concurrent calls, only the first finds it pending (scripts run
-- one at a time); an interrupt past the run's `expires` at `now` can no longer be answered.
-- An interrupt escalated since the caller read it (its expiry is not ARGV 17's) gets 'moved': the
-- caller reads it again (its filter indexes changed) and retries.
-- K and A are resume.lua's KEYS and ARGV:
-- K: 1 run, 2 journal, 3 workflow state, 4 events, 5 summary, 6 outbox, 7 the workflow's index newest,
--       8 its index expiring, 9 metrics, 10 the workflow's index of closed interrupts of the new
--       status, 11... A[18] filter indexes, then the next job's queues (see hand_off)
-- A: 1 token field, 2 expected request id as the run hash names it (keys.held_id; '' = any), 3 journal field, 4 entry blob,
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
local function resume_refused(K, A, delivering)
  local req = redis.call('HGET', K[1], A[1])
  if not req then
    if redis.call('EXISTS', K[1]) == 0 and redis.call('EXISTS', K[5]) == 1 then return {'expired'} end
    return {'unknown'}
  end
  if A[2] ~= '' and A[2] ~= req then return {'mismatch', req} end
  -- an answer its session keeps for the run's abandoned branch (session_answer) is the answer: another
  -- one is refused; only the switch back delivers it (`delivering`). A cancellation still goes through.
  if not delivering and A[11] == 'resolved' and redis.call('HGET', K[1], 'kept') == req then
    return {'already_resolved', req}
  end
  local sfield = A[15] .. req
  local cur = redis.call('HMGET', K[1], sfield, 'expires', 'step')
  if cur[1] ~= 'pending' then
    if cur[1] == 'expired' then return {'expired', req} end
    return {'already_resolved', req}
  end
  if tonumber(A[6]) >= (tonumber(cur[2]) or 0) then return {'expired', req} end
  if cur[2] ~= A[17] then return {'moved', req} end
  return nil
end

local function resume_commit(K, A)
  local req = redis.call('HGET', K[1], A[1])
  local sfield = A[15] .. req
  local step = redis.call('HGET', K[1], 'step')
  local hand = 11 + tonumber(A[18])  -- the first of the next job's keys
  for i = 11, hand - 1 do redis.call('ZREM', K[i], A[7]) end
  redis.call('HSET', K[2], A[3], A[4])
  local fence = redis.call('HINCRBY', K[1], 'fence', 1)
  redis.call('HSET', K[1], sfield, A[11], 'status', 'queued', 'waiting', '', 'expires', '', 'updated', A[6])
  redis.call('ZADD', K[6], A[6], A[9] .. ':' .. step .. ':' .. fence)
  redis.call('ZREM', K[7], A[7])
  redis.call('ZREM', K[8], A[8])
  xadd_run(K[1], K[4], A[10], A[12], A[5])
  local ttl = redis.call('HGET', K[1], 'ttl')
  expire_all(ttl, {K[1], K[2], K[3], K[4]})
  keep_summary(K[5], ttl, A[13])
  -- the wait, from the interrupt's creation
  local waited = math.max(0, tonumber(A[6]) - tonumber(A[16]))
  local bucket = '+Inf'
  for bound in string.gmatch(A[14], '%S+') do
    if waited <= tonumber(bound) * 1000 then bucket = bound break end
  end
  redis.call('HINCRBY', K[9], 'resumes:accepted', 1)
  redis.call('HINCRBY', K[9], 'wait:' .. bucket, 1)
  redis.call('HINCRBY', K[9], 'wait:sum_ms', waited)
  -- the lifecycle record: how it ended, and its place among the workflow's closed interrupts
  hset_parts(K[5], A[19], A[20])
  if A[24] ~= '' then hset_parts(K[5], A[23], A[24]) end
  redis.call('ZADD', K[10], 0, A[21])
  redis.call('ZREMRANGEBYLEX', K[10], '-', '(' .. A[22])
  if A[25] ~= '' then redis.call('HSET', K[1], 'ans', A[25]) end
  redis.call('HDEL', K[1], 'kept')
  return {'accepted', req, step, fence, hand_off({K[hand], K[hand + 1]}, A, 26, step, fence)}
end
