-- Read the interrupt a token names, and whether it can still be answered: pending until the run's
-- `expires` (the interrupt's) has passed at `now`, and its run's workflow reference (for the resume's
-- check of the code version).
-- Returns {status}, {status, request id}, or, when the run holds the interrupt's record,
-- {status, request id, workflow, workflow reference, the record's parts in order}; the request id
-- as the run hash names it (layout.short_id: without its run id; layout.full_id reads it back).
-- KEYS
--   run            the run's hash
--   summary        the run's summary (what is left of an expired run)
-- ARGV
--   token_field    the token's field in the run hash
--   now            ms
--   status_prefix  what an interrupt's status field starts with (keys.STATUS_PREFIX)
local req = redis.call('HGET', K.run, A.token_field) or legacy_token(K.run, A.token_field)
if not req then
  if redis.call('EXISTS', K.run) == 0 and redis.call('EXISTS', K.summary) == 1 then return {'expired'} end
  return {'unknown'}
end
local status_field = A.status_prefix .. req
local cur = hmget(K.run, {status_field, F.expires, F.rq, F.rn, F.wf, F.ref})
local status = cur[status_field]
if status == 'pending' and tonumber(A.now) >= (tonumber(cur.expires) or 0) then status = 'expired' end
local out = {status, req, cur.wf, cur.ref or ''}
if cur.rq == req then
  for i = 0, tonumber(cur.rn) - 1 do out[#out + 1] = redis.call('HGET', K.run, P.record .. i) end
else  -- an earlier interrupt of the run: its parts under names of its own
  local i = 0
  while true do
    local part = redis.call('HGET', K.run, P.earlier .. req .. ':' .. i)
    if not part then break end
    out[#out + 1] = part
    i = i + 1
  end
end
if #out == 4 then return {status, req} end
return out
