-- Open a session: its record and its first event.
-- KEYS
--   session: session  the session's keys
-- ARGV
--   agent          the agent's reference
--   workflow       the agent's workflow name
--   owner          the session's owner
--   tenant         its tenant
--   ttl            ms its records live
--   now            ms
--   maxlen         the stream's cap
--   event          session.opened blob
--   incarnation    a nonce: an id opened again after it expired is another session
local S = K.session
if redis.call('EXISTS', S.hash) == 1 then return redis.error_reply('EXISTS session id is taken') end
redis.call('HSET', S.hash, F.agent, A.agent, F.wf, A.workflow, F.owner, A.owner, F.tenant, A.tenant,
  F.head, '', F.ttl, A.ttl, F.created, A.now, F.updated, A.now, F.inc, A.incarnation)
sxadd(S, A.maxlen, 'session.opened', A.event)
touch(S, A.ttl)
return 1
