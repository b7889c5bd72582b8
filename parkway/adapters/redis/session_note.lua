-- Record who cleared a run's interrupt (the audit). One left on an abandoned branch (`keep` = 1)
-- no longer parks that branch, and its answer waits in deliveries until the branch is active
-- again (then the client delivers it by the run's token, exactly once, and session_delivered
-- drops it). A second clearing is a no-op.
-- KEYS: 1 session, 2 deliveries, 3 interrupts, 4 session events
-- ARGV: 1 request id, 2 run id, 3 record blob, 4 event blob, 5 now, 6 maxlen, 7 keep (1 | 0)
local ttl = redis.call('HGET', KEYS[1], 'ttl')
if not ttl then return 'gone' end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return 'already_cleared' end
if ARGV[7] == '1' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[1], 'updated', ARGV[5])
xadd(KEYS[4], ARGV[6], 'interrupt.cleared', ARGV[4])
expire_all(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4]})
return 'cleared'
