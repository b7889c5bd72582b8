-- Begin a node attempt: check the fence, take the lease, drop the outbox entry, mark the
-- run running, and return what the attempt needs. A run already running at this fence under
-- a live lease belongs to another attempt (a duplicate or re-delivered job): refused as stale,
-- so one activation never runs twice at once. A lapsed lease may be taken over.
-- KEYS: 1 run, 2 journal of the step, 3 workflow state, 4 leases, 5 outbox, 6 metrics
-- ARGV: 1 step, 2 fence, 3 now, 4 lease until (ms), 5 run id, 6 outbox member
local cur, err = check_fence(KEYS[1], ARGV[2], {'queued', 'running'})
if not cur then return err end
if cur[3] ~= ARGV[1] then return stale('run is at step ' .. cur[3] .. ', the job has ' .. ARGV[1]) end
if cur[2] == 'running' then
  local lease = redis.call('ZSCORE', KEYS[4], ARGV[5])
  if lease and tonumber(lease) > tonumber(ARGV[3]) then
    return stale('another attempt holds the lease of this activation')
  end
end
redis.call('HSET', KEYS[1], 'status', 'running', 'updated', ARGV[3])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[5])
redis.call('ZREM', KEYS[5], ARGV[6])
redis.call('HINCRBY', KEYS[6], 'attempts', 1)
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
