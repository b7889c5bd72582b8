-- Answer a branch run's interrupt through its session, in one step with recording who cleared it:
-- a second answer, however it races this one, finds it cleared (already_cleared), never unknown.
-- On the active path the answer goes to the run at once (resume_commit: the run is queued); on an
-- abandoned branch it is kept in deliveries, and the branch's interrupt no longer parks it:
-- session_switch delivers it, in its own step, when the branch is active again. Refusals are
-- resume_refused's, with nothing written.
-- Returns {'accepted', request id, step, fence, handed off, ids still parking the head...},
-- {'kept'}, {'already_cleared'}, {'gone'}, {'not_live'} (the run is no branch run of the session
-- now), or resume_refused's reply.
-- KEYS
--   session: session  the session's keys
--   resume: resume  the answer's resume call (see _resume.lua)
-- ARGV
--   request_id     the interrupt answered
--   run_id         its run
--   record         the cleared record blob
--   now            ms
--   maxlen         the stream's cap
--   delivered      interrupt.cleared blob (delivered)
--   kept           interrupt.cleared blob (kept)
--   resume: resume  (see KEYS)
local S = K.session
local ttl = session_ttl(S)
if not ttl then return {'gone'} end
if redis.call('HEXISTS', S.interrupts, A.request_id) == 1 then return {'already_cleared'} end
local refused, pending = resume_refused(K.resume, A.resume)
if refused then return refused end
local leaf = redis.call('HGET', S.live, A.run_id)
if not leaf then return {'not_live'} end
local head = redis.call('HGET', S.hash, F.head)
local on_active = path_of(S, head)
redis.call('HSET', S.interrupts, A.request_id, A.record)
if not on_active[leaf] then
  redis.call('HSET', S.deliveries, A.request_id, A.run_id)
  -- its token answers nothing else now (resume_refused): `kept` names it as the run hash does
  redis.call('HSET', K.resume.run, F.kept, pending.req)
  sxadd(S, A.maxlen, 'interrupt.cleared', A.kept)
  touch(S, ttl, A.now)
  return {'kept'}
end
local taken = resume_commit(K.resume, A.resume, pending)
sxadd(S, A.maxlen, 'interrupt.cleared', A.delivered)
touch(S, ttl, A.now)
local still = parking(S.open, S.deliveries, {}, on_active)
local _, req, step, fence, handed = unpack(taken)  -- resume_commit's reply
return {'accepted', req, step, fence, handed, unpack(still)}
