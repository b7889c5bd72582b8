-- An answer kept for an abandoned branch was delivered to its run (by token): drop it, once.
-- KEYS: 1-8 the session's
-- ARGV: 1 request id, 2 maxlen, 3 event blob
if redis.call('HDEL', S.dl, ARGV[1]) == 0 then return 0 end
xadd(S.sev, ARGV[2], 'interrupt.delivered', ARGV[3])
local ttl = session_ttl()
if ttl then touch(ttl) end
return 1
