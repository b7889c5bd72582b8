-- End a queued or running run (or a session's branch run held on its parked branch, or a run
-- waiting on a child run, on its fan-out's children, or on an interrupt past its deadline) as
-- failed or cancelled. A parent ended while it waits on a child is ended
-- first, before its child: the child's end then finds it finished and queues nothing (cancel wins).
-- A run failed in the activation whose interrupt was last answered (its replay with the answer
-- failed): that interrupt's lifecycle record says so (its x: field in the summary, which the run's
-- 'ans' names).
-- KEYS: 1 run, 2 workflow state, 3 events, 4 summary, 5 leases, 6 metrics, 7... the parent's (see notify_parent)
-- ARGV: 1 fence ('' = whatever is current), 2 status, 3 error blob ('' = none), 4 now,
--       5 retention ms, 6 maxlen, 7 event type, 8 event blob, 9 done blob, 10 run id,
--       11 the failed replay's lifecycle blob with the error's message, 12 with its type only
--       (for an interrupt whose output is not captured), 13... the parent's (see notify_parent)
local cur = redis.call('HMGET', KEYS[1], 'fence', 'status', 'waiting', 'expires')
if not cur[1] then return gone() end
if ARGV[1] ~= '' and cur[1] ~= ARGV[1] then return stale('run is at fence ' .. cur[1]) end
local waiting = cur[2] == 'waiting' and (cur[3] or '') or ''
-- a run waiting on an interrupt past its deadline, its policy not yet applied (the reconciler
-- then records the interrupt expired and, the run no longer waiting on it, moves nothing)
local overdue = waiting ~= '' and tonumber(ARGV[4]) >= (tonumber(cur[4]) or math.huge)
if cur[2] ~= 'queued' and cur[2] ~= 'running' and waiting ~= 'session' and waiting ~= 'children'
    and string.sub(waiting, 1, 6) ~= 'child:' and not overdue then
  return stale('run is ' .. cur[2])
end
redis.call('HINCRBY', KEYS[1], 'fence', 1)
if ARGV[2] == 'failed' and ARGV[11] ~= '' then
  local answered = redis.call('HMGET', KEYS[1], 'ans', 'step')
  if answered[1] then
    local step, field, output = string.match(answered[1], '^(%d+) (%S+) (%d)$')
    if step == answered[2] then hset_parts(KEYS[4], field, output == '1' and ARGV[11] or ARGV[12]) end
  end
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'updated', ARGV[4])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'error', ARGV[3]) end
redis.call('HSET', KEYS[4], 'status', ARGV[2], 'updated', ARGV[4])
redis.call('ZREM', KEYS[5], ARGV[10])
redis.call('HINCRBY', KEYS[6], 'runs:' .. ARGV[2], 1)
xadd_run(KEYS[1], KEYS[3], ARGV[6], ARGV[7], ARGV[8])
xadd_run(KEYS[1], KEYS[3], ARGV[6], 'done', ARGV[9])
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[2], KEYS[3]})
keep_summary(KEYS[4], ttl, ARGV[5])
notify_parent(7, 13)
return 1
