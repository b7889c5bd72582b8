-- Commit a pause: store the interrupt in the run's own record, index it, release the lease,
-- publish the interrupt event, note the pause on the pause feed (what waiting listings block on).
-- The interrupt lives in the run hash (no key of its own, no pending key): its token field names
-- it, its status field says whether it can still be answered (with the run's `expires`), and its
-- record is split into fields of at most 64 bytes so the hash keeps Redis's compact encoding.
-- The run's records live `grace` ms past the interrupt so the reconciler can still record its expiry.
-- KEYS: 1 run, 2 journal, 3 workflow state, 4 events, 5 the workflow's index newest, 6 its index expiring,
--       7 leases, 8 summary, 9 workflows with interrupts, 10 pause feed, 11... ARGV[19] filter indexes
--       (audience, tenant, session: each given only when the interrupt has it), then ANCESTOR_KEYS (6) keys per ancestor
--       of a child run: events, run, journal of the step waiting, workflow state, summary (the
--       interrupt shows on their streams too, and their records live at least as long as it does),
--       last: the run's snapshots (see advance.lua), kept as long as the run
-- ARGV: 1 fence, 2 step, 3 request id, 4 token field, 5 status field, 6 ttl ms, 7 now, 8 expires at,
--       9 member newest, 10 member expiring, 11 the interrupt event as the run's stream keeps it (its
--       record has the rest: codec.held_interrupt_event), 12 maxlen, 13 grace ms, 14 run id,
--       15 retention ms, 16 workflow name, 17 pause feed maxlen, 18 the step and the code's version
--       ("<step> <version>", the run's 'paused'; '' = none), 19 number of filter indexes, 20 the interrupt
--       event whole, for the ancestors' streams ('' for a root run), 21... the record's fields as pairs: rq and its name in the run hash (keys.held_id), rn and its number of parts, then each part's
--       field and part (its lifecycle record is written when it ends: see resume.lua)
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
redis.call('ZADD', KEYS[5], 0, ARGV[9])
redis.call('ZADD', KEYS[6], 0, ARGV[10])
local anc = 11 + tonumber(ARGV[19])  -- the first ancestor key
for i = 11, anc - 1 do redis.call('ZADD', KEYS[i], 0, ARGV[9]) end
redis.call('SADD', KEYS[9], ARGV[16])
redis.call('ZREM', KEYS[7], ARGV[14])
if ARGV[18] ~= '' then redis.call('HSET', KEYS[1], 'paused', ARGV[18]) end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
-- the record the run held (its interrupt before this one, answered or expired) keeps its parts
-- under names of its own, r:<req>:<i>, for reads by request id; the new one takes r0, r1, ...
local held = redis.call('HMGET', KEYS[1], 'rq', 'rn')
if held[1] then
  for i = 0, tonumber(held[2]) - 1 do
    redis.call('HSET', KEYS[1], 'r:' .. held[1] .. ':' .. i, redis.call('HGET', KEYS[1], 'r' .. i))
    redis.call('HDEL', KEYS[1], 'r' .. i)
  end
end
-- the token field names the interrupt as rq does (ARGV[22]: its request id without the run id)
redis.call('HSET', KEYS[1], 'status', 'waiting', 'waiting', ARGV[3], 'expires', ARGV[8], 'updated', ARGV[7],
  'crashes', 0, ARGV[4], ARGV[22], ARGV[5], 'pending', unpack(ARGV, 21))
-- a new pause: the interrupt answered before it (if any) did not fail its replay
redis.call('HDEL', KEYS[1], 'ans')
xadd_run(KEYS[1], KEYS[4], ARGV[12], 'interrupt', ARGV[11])
for i = anc, #KEYS - 1, ANCESTOR_KEYS do xadd_run(KEYS[i + 1], KEYS[i], ARGV[12], 'interrupt', ARGV[20]) end
redis.call('XADD', KEYS[10], 'MAXLEN', '~', ARGV[17], '*', 'w', ARGV[16], 'r', ARGV[14])
local held = tonumber(ARGV[6]) + tonumber(ARGV[13])
expire_all(held, {KEYS[1], KEYS[2], KEYS[3], KEYS[#KEYS]})
-- its few events move into its hash while it waits, the stream gone in FOLD_WAKE_MS (see fold in
-- _common.lua); else the stream lives as long as the run, rebuilt at its real size: Redis 7.0
-- allocates a stream's first node at stream-node-max-bytes (4 KiB) however few entries it holds,
-- and a parked run may wait for hours
if not fold(KEYS[1], KEYS[4]) then
  local stream = redis.call('DUMP', KEYS[4])
  redis.call('DEL', KEYS[4])
  redis.call('RESTORE', KEYS[4], held, stream)
end
keep_summary(KEYS[8], held, ARGV[15])
keep_ancestors(anc, #KEYS - 1, held, ARGV[15])
return fence
