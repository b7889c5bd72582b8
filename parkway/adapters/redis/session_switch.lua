-- Move a session's active head to one of its messages ('' = before the first message).
-- KEYS: 1 session, 2 up, 3 session events
-- ARGV: 1 head, 2 now, 3 maxlen, 4 event blob
local ttl = redis.call('HGET', KEYS[1], 'ttl')
if not ttl then return 'gone' end
if ARGV[1] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 'no_message' end
redis.call('HSET', KEYS[1], 'head', ARGV[1], 'updated', ARGV[2])
xadd(KEYS[3], ARGV[3], 'head.switched', ARGV[4])
expire_all(ttl, {KEYS[1], KEYS[3]})
return 'ok'
