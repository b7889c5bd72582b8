-- Move a session's active head to one of its messages ('' = before the first message), and in the
-- same step deliver the answers kept for the branches the new head's path runs through (answered
-- while abandoned: session_answer), each exactly once; a kept answer whose run can no longer take
-- it (it ended, or was answered by its token) is dropped with an interrupt.undelivered event. The
-- caller prepares each delivery (its resume call); when the kept answers due on the new path are
-- not the ones it prepared (a racing answer or switch changed them, or one is for a live run off
-- that path), or one was escalated since it was read, nothing is written and the caller reads
-- again ('retry').
-- Returns {'ok', then per delivery: request id, run id, step, fence, handed off ('' when dropped)},
-- 'retry', 'gone' or 'no_message'.
-- KEYS
--   session: session  the session's keys
--   deliveries...: delivery  the kept answers due on the new path, as the caller prepared them
-- ARGV
--   #deliveries    how many
--   head           the new head
--   now            ms
--   maxlen         the stream's cap
--   switched       head.switched blob
--   deliveries...: delivery  (see KEYS)
local S = K.session
local ttl = session_ttl(S)
if not ttl then return {'gone'} end
local head = A.head
if head ~= '' and redis.call('HEXISTS', S.up, head) == 0 then return {'no_message'} end
local on = path_of(S, head)
local given = {}
for _, d in ipairs(A.deliveries) do given[d.request_id] = true end
-- the kept answers due on the new path must be exactly the ones prepared
local kept = redis.call('HGETALL', S.deliveries)
for i = 1, #kept, 2 do
  local leaf = redis.call('HGET', S.live, kept[i + 1])
  if leaf and on[leaf] and not given[kept[i]] then return {'retry'} end
end
local refused, pending = {}, {}
for i, d in ipairs(A.deliveries) do
  if redis.call('HGET', S.deliveries, d.request_id) ~= d.run_id then return {'retry'} end
  -- only onto its own branch: a kept answer for a live run the new path does not run through stays kept
  local leaf = redis.call('HGET', S.live, d.run_id)
  if leaf and not on[leaf] then return {'retry'} end
  if d.resume then
    refused[i], pending[i] = resume_refused(K.deliveries[i].resume, d.resume, true)
    if refused[i] and refused[i][1] == 'moved' then return {'retry'} end
  end
end
move_head(S, head)
sxadd(S, A.maxlen, 'head.switched', A.switched)
local out = {'ok'}
for i, d in ipairs(A.deliveries) do
  redis.call('HDEL', S.deliveries, d.request_id)
  if not d.resume or refused[i] then
    sxadd(S, A.maxlen, 'interrupt.undelivered', d.undelivered)
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = d.request_id, d.run_id, '', '', ''
  else
    local taken = resume_commit(K.deliveries[i].resume, d.resume, pending[i])
    sxadd(S, A.maxlen, 'interrupt.delivered', d.delivered)
    local _, _, step, fence, handed = unpack(taken)  -- resume_commit's reply
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = d.request_id, d.run_id, step,
      fence, handed
  end
end
touch(S, ttl, A.now)
return out
