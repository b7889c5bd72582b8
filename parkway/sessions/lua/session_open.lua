-- Open a session: its record and its first event.
-- KEYS: 1-8 the session's (see _session.lua)
-- ARGV: 1 agent ref, 2 agent workflow name, 3 owner, 4 tenant, 5 ttl ms, 6 now, 7 maxlen, 8 event blob,
--       9 incarnation (a nonce: an id opened again after it expired is another session)
if redis.call('EXISTS', S.s) == 1 then return redis.error_reply('EXISTS session id is taken') end
redis.call('HSET', S.s, 'agent', ARGV[1], 'wf', ARGV[2], 'owner', ARGV[3], 'tenant', ARGV[4],
  'head', '', 'ttl', ARGV[5], 'created', ARGV[6], 'updated', ARGV[6], 'inc', ARGV[9])
xadd(S.sev, ARGV[7], 'session.opened', ARGV[8])
touch(ARGV[5])
return 1
