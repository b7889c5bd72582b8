-- Move a session's active head to one of its messages ('' = before the first message).
-- KEYS: 1-8 the session's
-- ARGV: 1 head, 2 now, 3 maxlen, 4 event blob
local ttl = session_ttl()
if not ttl then return 'gone' end
if ARGV[1] ~= '' and redis.call('HEXISTS', S.up, ARGV[1]) == 0 then return 'no_message' end
redis.call('HSET', S.s, 'head', ARGV[1])
xadd(S.sev, ARGV[3], 'head.switched', ARGV[4])
touch(ttl, ARGV[2])
return 'ok'
