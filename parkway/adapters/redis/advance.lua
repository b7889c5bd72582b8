-- Commit a completed node: merge data, go to the next node (same job, same lease) or finish.
-- KEYS: 1 run, 2 journal of the step, 3 workflow state, 4 events, 5 summary, 6 leases, 7 metrics,
--       8 snapshots (what fork.lua re-opens a step from), 9... the parent's (see notify_parent)
-- ARGV: 1 fence, 2 step, 3 data blob, 4 next node ('' = run ends), 5 output blob, 6 now,
--       7 retention ms, 8 maxlen, 9 run id, 10 n, then n pairs of (event type, event blob),
--       then the parent's (see notify_parent)
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('DEL', KEYS[2])
-- the node this step ran, and the data the next step starts with (step 0 starts with the input)
redis.call('HSET', KEYS[8], ARGV[2] .. ':node', redis.call('HGET', KEYS[1], 'node'))
if ARGV[4] ~= '' then redis.call('HSET', KEYS[8], tonumber(ARGV[2]) + 1, ARGV[3]) end
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'updated', ARGV[6], 'crashes', 0)
if ARGV[4] == '' then
  redis.call('HSET', KEYS[1], 'status', 'completed', 'output', ARGV[5])
  redis.call('HSET', KEYS[5], 'status', 'completed', 'updated', ARGV[6])
  redis.call('ZREM', KEYS[6], ARGV[9])
  redis.call('HINCRBY', KEYS[7], 'runs:completed', 1)
else
  redis.call('HSET', KEYS[1], 'node', ARGV[4], 'step', tonumber(ARGV[2]) + 1)
end
local n = tonumber(ARGV[10])
for i = 11, 10 + 2 * n, 2 do xadd_run(KEYS[1], KEYS[4], ARGV[8], ARGV[i], ARGV[i + 1]) end
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[3], KEYS[4], KEYS[8]})
keep_summary(KEYS[5], ttl, ARGV[7])
if ARGV[4] == '' then notify_parent(9, 11 + 2 * n) end  -- last: a fan-out's child's records go there
return fence
