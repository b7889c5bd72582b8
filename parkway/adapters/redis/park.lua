-- Commit a pause: store and index the interrupt, open its pending key, release the lease,
-- publish the interrupt event, note the pause on the pause feed (what waiting listings block on).
-- The run's records live `grace` ms past the interrupt so the reconciler can still record its expiry.
-- KEYS: 1 run, 2 journal, 3 workflow state, 4 events, 5 interrupts, 6 pending,
--       7 index newest, 8 index expiring, 9 index newest of workflow, 10 index expiring of workflow,
--       11 leases, 12 summary, 13 workflows with interrupts, 14 pause feed, 15... five keys per ancestor
--       of a child run: events, run, journal of the step waiting, workflow state, summary (the
--       interrupt shows on their streams too, and their records live at least as long as it does)
-- ARGV: 1 fence, 2 step, 3 request id, 4 token hash, 5 record blob, 6 ttl ms, 7 now, 8 expires at,
--       9 member newest, 10 member expiring, 11 event blob, 12 maxlen, 13 grace ms, 14 run id,
--       15 retention ms, 16 workflow name, 17 pause feed maxlen
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
redis.call('HSET', KEYS[5], 'r:' .. ARGV[3], ARGV[5], 's:' .. ARGV[3], 'pending', 't:' .. ARGV[4], ARGV[3])
redis.call('SET', KEYS[6], ARGV[3], 'PX', ARGV[6])
redis.call('ZADD', KEYS[7], 0, ARGV[9])
redis.call('ZADD', KEYS[8], 0, ARGV[10])
redis.call('ZADD', KEYS[9], 0, ARGV[9])
redis.call('ZADD', KEYS[10], 0, ARGV[10])
redis.call('SADD', KEYS[13], ARGV[16])
redis.call('ZREM', KEYS[11], ARGV[14])
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'status', 'waiting', 'waiting', ARGV[3], 'expires', ARGV[8], 'updated', ARGV[7],
  'crashes', 0)
xadd(KEYS[4], ARGV[12], 'interrupt', ARGV[11])
for i = 15, #KEYS, 5 do xadd(KEYS[i], ARGV[12], 'interrupt', ARGV[11]) end
redis.call('XADD', KEYS[14], 'MAXLEN', '~', ARGV[17], '*', 'w', ARGV[16], 'r', ARGV[14])
-- Redis 7.0 allocates a stream's first node at stream-node-max-bytes (4 KiB) however few entries
-- it holds; a parked run may wait for hours, so its stream is rebuilt at its real size.
local stream = redis.call('DUMP', KEYS[4])
redis.call('DEL', KEYS[4])
redis.call('RESTORE', KEYS[4], 0, stream)
local held = tonumber(ARGV[6]) + tonumber(ARGV[13])
expire_all(held, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]})
keep_summary(KEYS[12], held, ARGV[15])
for i = 15, #KEYS, 5 do
  if redis.call('PTTL', KEYS[i + 1]) < held then
    expire_all(held, {KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3]})
    keep_summary(KEYS[i + 4], held, ARGV[15])
  end
end
return fence
