-- Raise a session-level interrupt (by a caller, not by node code): anchored at a message, it
-- parks every path through it; with no anchor it parks every branch. An id already used is a no-op.
-- KEYS
--   session: session  the session's keys
-- ARGV
--   interrupt_id   the interrupt's id
--   anchor         the message it parks the paths through ('' = global)
--   record         its record blob
--   event          interrupt.raised blob
--   now            ms
--   maxlen         the stream's cap
local S = K.session
local ttl = session_ttl(S)
if not ttl then return 'gone' end
if redis.call('HEXISTS', S.interrupts, A.interrupt_id) == 1 then return 'exists' end
if A.anchor ~= '' and redis.call('HEXISTS', S.up, A.anchor) == 0 then return 'no_anchor' end
redis.call('HSET', S.open, A.interrupt_id, A.anchor)
redis.call('HSET', S.interrupts, A.interrupt_id, A.record)
sxadd(S, A.maxlen, 'interrupt.raised', A.event)
touch(S, ttl, A.now)
return 'raised'
