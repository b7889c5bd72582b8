-- Record who cleared a run's interrupt (the audit). One left on an abandoned branch (`keep` = 1)
-- no longer parks that branch, and its answer waits in deliveries until the branch is active
-- again (then the client delivers it by the run's token, exactly once, and session_delivered
-- drops it); if the branch became active meanwhile (`leaf` on the head's path) nothing is written
-- and the caller delivers at once instead. A second clearing is a no-op.
-- KEYS: 1-8 the session's
-- ARGV: 1 request id, 2 run id, 3 record blob, 4 event blob, 5 now, 6 maxlen, 7 keep (1 | 0),
--       8 the run's leaf
local ttl = session_ttl()
if not ttl then return 'gone' end
if redis.call('HEXISTS', S.i, ARGV[1]) == 1 then return 'already_cleared' end
if ARGV[7] == '1' then
  if path_of(S.up, redis.call('HGET', S.s, 'head'))[ARGV[8]] then return 'active' end
  redis.call('HSET', S.dl, ARGV[1], ARGV[2])
end
redis.call('HSET', S.i, ARGV[1], ARGV[3])
xadd(S.sev, ARGV[6], 'interrupt.cleared', ARGV[4])
touch(ttl, ARGV[5])
return 'cleared'
