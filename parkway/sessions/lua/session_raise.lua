-- Raise a session-level interrupt (by a caller, not by node code): anchored at a message, it
-- parks every path through it; with no anchor it parks every branch. An id already used is a no-op.
-- KEYS: 1-8 the session's
-- ARGV: 1 interrupt id, 2 anchor ('' = global), 3 record blob, 4 event blob, 5 now, 6 maxlen
local ttl = session_ttl()
if not ttl then return 'gone' end
if redis.call('HEXISTS', S.i, ARGV[1]) == 1 then return 'exists' end
if ARGV[2] ~= '' and redis.call('HEXISTS', S.up, ARGV[2]) == 0 then return 'no_anchor' end
redis.call('HSET', S.open, ARGV[1], ARGV[2])
redis.call('HSET', S.i, ARGV[1], ARGV[3])
xadd(S.sev, ARGV[6], 'interrupt.raised', ARGV[4])
touch(ttl, ARGV[5])
return 'raised'
