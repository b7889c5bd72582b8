-- Answer a branch run's interrupt through its session, in one step with recording who cleared it:
-- a second answer, however it races this one, finds it cleared (already_cleared), never unknown.
-- On the active path the answer goes to the run at once (resume_commit: the run is queued); on an
-- abandoned branch it is kept in deliveries, and the branch's interrupt no longer parks it:
-- session_switch delivers it, in its own step, when the branch is active again. Refusals are
-- resume_refused's, with nothing written.
-- KEYS: 1-8 the session's, 9... resume.lua's (see _resume.lua)
-- ARGV: 1 request id, 2 run id, 3 cleared record blob, 4 now, 5 maxlen, 6 interrupt.cleared blob
--       (delivered), 7 interrupt.cleared blob (kept), 8 number of resume.lua's ARGV, 9... them
-- Returns {'accepted', request id, step, fence, handed off, ids still parking the head...},
-- {'kept'}, {'already_cleared'}, {'gone'}, {'not_live'} (the run is no branch run of the session
-- now), or resume_refused's reply.
local ttl = session_ttl()
if not ttl then return {'gone'} end
local req, run = ARGV[1], ARGV[2]
if redis.call('HEXISTS', S.i, req) == 1 then return {'already_cleared'} end
local K, A = bind_call(SPEC.resume, {unpack(KEYS, SESSION_KEYS + 1)}, {unpack(ARGV, 9, 8 + tonumber(ARGV[8]))})
local refused = resume_refused(K, A)
if refused then return refused end
local leaf = redis.call('HGET', S.live, run)
if not leaf then return {'not_live'} end
local head = redis.call('HGET', S.s, 'head')
local on_active = path_of(S.up, head)
redis.call('HSET', S.i, req, ARGV[3])
if not on_active[leaf] then
  redis.call('HSET', S.dl, req, run)
  -- its token answers nothing else now (resume_refused): `kept` names it as the run hash does
  redis.call('HSET', K.run, 'kept', redis.call('HGET', K.run, A.token_field))
  xadd(S.sev, ARGV[5], 'interrupt.cleared', ARGV[7])
  touch(ttl, ARGV[4])
  return {'kept'}
end
local taken = resume_commit(K, A)
xadd(S.sev, ARGV[5], 'interrupt.cleared', ARGV[6])
touch(ttl, ARGV[4])
local still = parking(S.open, S.dl, {}, on_active)
return {'accepted', taken[2], taken[3], taken[4], taken[5], unpack(still)}
