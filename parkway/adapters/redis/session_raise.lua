-- Raise a session-level interrupt (by a caller, not by node code): anchored at a message, it
-- parks every path through it; with no anchor it parks every branch. An id already used is a no-op.
-- KEYS: 1 session, 2 up, 3 open, 4 interrupts, 5 session events
-- ARGV: 1 interrupt id, 2 anchor ('' = global), 3 record blob, 4 event blob, 5 now, 6 maxlen
local ttl = redis.call('HGET', KEYS[1], 'ttl')
if not ttl then return 'gone' end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return 'exists' end
if ARGV[2] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then return 'no_anchor' end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[1], 'updated', ARGV[5])
xadd(KEYS[5], ARGV[6], 'interrupt.raised', ARGV[4])
expire_all(ttl, {KEYS[1], KEYS[3], KEYS[4], KEYS[5]})
return 'raised'
