-- End a queued or running run (or a session's branch run held on its parked branch) as failed or
-- cancelled.
-- KEYS: 1 run, 2 workflow state, 3 events, 4 summary, 5 leases, 6 metrics, 7... the parent's (see notify_parent)
-- ARGV: 1 fence ('' = whatever is current), 2 status, 3 error blob ('' = none), 4 now,
--       5 retention ms, 6 maxlen, 7 event type, 8 event blob, 9 done blob, 10 run id,
--       11... the parent's (see notify_parent)
local cur = redis.call('HMGET', KEYS[1], 'fence', 'status')
if not cur[1] then return stale('run is gone') end
if ARGV[1] ~= '' and cur[1] ~= ARGV[1] then return stale('run is at fence ' .. cur[1]) end
if cur[2] ~= 'queued' and cur[2] ~= 'running'
    and not (cur[2] == 'waiting' and redis.call('HGET', KEYS[1], 'waiting') == 'session') then
  return stale('run is ' .. cur[2])
end
redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updated', ARGV[4])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[3]) end
redis.call('HSET', KEYS[4], 'status', ARGV[2], 'updated', ARGV[4])
redis.call('ZREM', KEYS[5], ARGV[10])
redis.call('HINCRBY', KEYS[6], 'runs:' .. ARGV[2], 1)
xadd(KEYS[3], ARGV[6], ARGV[7], ARGV[8])
xadd(KEYS[3], ARGV[6], 'done', ARGV[9])
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[2], KEYS[3]})
keep_summary(KEYS[4], ttl, ARGV[5])
notify_parent(7, 11)
return 1
