-- A running run whose lease expired (its worker died or hangs): requeue it for replay on a
-- live worker under a new fence, or fail it after too many lost attempts.
-- KEYS: 1 run, 2 events, 3 outbox, 4 summary, 5 leases, 6 metrics, 7... the parent's (see notify_parent)
-- ARGV: 1 run id, 2 now, 3 max lost attempts, 4 retention ms, 5 maxlen,
--       6 recovered event blob, 7 failed error blob, 8 run.failed blob, 9 done blob,
--       10... the parent's (see notify_parent)
local score = redis.call('ZSCORE', KEYS[5], ARGV[1])
if score and tonumber(score) > tonumber(ARGV[2]) then return {'alive'} end
redis.call('ZREM', KEYS[5], ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'status', 'step', 'crashes')
if cur[1] ~= 'running' then return {'gone'} end
local crashes = tonumber(cur[3] or '0') + 1
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'crashes', crashes, 'updated', ARGV[2])
if crashes >= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[7])
  redis.call('HSET', KEYS[4], 'status', 'failed', 'updated', ARGV[2])
  keep_summary(KEYS[4], records_left(KEYS[1]), ARGV[4])
  xadd_run(KEYS[1], KEYS[2], ARGV[5], 'run.failed', ARGV[8])
  redis.call('HINCRBY', KEYS[6], 'runs:failed', 1)
  xadd_run(KEYS[1], KEYS[2], ARGV[5], 'done', ARGV[9])
  notify_parent(7, 10)
  return {'failed', cur[2], fence}
end
redis.call('HSET', KEYS[1], 'status', 'queued')
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1] .. ':' .. cur[2] .. ':' .. fence)
xadd_run(KEYS[1], KEYS[2], ARGV[5], 'node.recovered', ARGV[6])
redis.call('HINCRBY', KEYS[6], 'recovered', 1)
return {'requeued', cur[2], fence}
