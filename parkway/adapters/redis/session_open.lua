-- Open a session: its record and its first event.
-- KEYS: 1 session, 2 session events
-- ARGV: 1 agent ref, 2 agent workflow name, 3 owner, 4 tenant, 5 ttl ms, 6 now, 7 maxlen, 8 event blob
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('EXISTS session id is taken') end
redis.call('HSET', KEYS[1], 'agent', ARGV[1], 'wf', ARGV[2], 'owner', ARGV[3], 'tenant', ARGV[4],
  'head', '', 'ttl', ARGV[5], 'created', ARGV[6], 'updated', ARGV[6])
xadd(KEYS[2], ARGV[7], 'session.opened', ARGV[8])
expire_all(ARGV[5], {KEYS[1], KEYS[2]})
return 1
