-- A node called use_workflow: park the parent on a new child run and create the child, in one
-- step (a tree shares one hash tag, so both runs' keys are in this slot). The parent holds no
-- lease and no job while it waits; the child's records say where its outcome goes, and the script
-- that ends the child records it there and queues the parent (notify_parent in _common.lua).
-- KEYS: 1 parent run, 2 parent journal, 3 parent workflow state, 4 parent events, 5 parent summary,
--       6 leases, 7 child run, 8 child summary, 9 child events, 10 outbox, 11 parent snapshots
--       (see advance.lua), 12-13 the child's first job's queues (see hand_off)
-- ARGV: 1 fence, 2 step, 3 now, 4 parent run id, 5 child run id, 6 child.started blob, 7 maxlen,
--       8 retention ms, 9 grace ms, 10 child workflow, 11 child ref, 12 child start node,
--       13 child input blob, 14 child ttl ms, 15 child run.started blob, 16 journal field in the parent,
--       17 lineage (ancestors as run:step, parent first, space-separated), 18 the child check's
--       journal field (c:<id>), 19 its entry, 20... the child's first job (see hand_off; the child's
--       node.started is its job's, as for any run: begin.lua)
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'status', 'waiting', 'waiting', 'child:' .. ARGV[5], 'expires', '',
  'updated', ARGV[3], 'crashes', 0)
redis.call('ZREM', KEYS[6], ARGV[4])
xadd_run(KEYS[1], KEYS[4], ARGV[7], 'child.started', ARGV[6])
redis.call('HSET', KEYS[2], ARGV[18], ARGV[19])
-- the parent outlives its child's records (the child has the parent's TTL from now)
local held = tonumber(redis.call('HGET', KEYS[1], 'ttl')) + tonumber(ARGV[9])
expire_all(held, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[11]})
keep_summary(KEYS[5], held, ARGV[8])
if redis.call('EXISTS', KEYS[7]) == 1 or redis.call('EXISTS', KEYS[8]) == 1 then
  return fence  -- the child exists already: the parent waits on it, nothing starts twice
end
redis.call('HSET', KEYS[7], 'wf', ARGV[10], 'ref', ARGV[11], 'status', 'queued', 'node', ARGV[12],
  'step', 0, 'fence', 0, 'input', ARGV[13], 'created', ARGV[3], 'updated', ARGV[3],
  'ttl', ARGV[14], 'parent', ARGV[4], 'pstep', ARGV[2], 'pfield', ARGV[16], 'lineage', ARGV[17])
redis.call('HSET', KEYS[8], 'wf', ARGV[10], 'status', 'queued', 'created', ARGV[3], 'updated', ARGV[3])
local auth = authority_of(KEYS[1])  -- a child is its tree's (its interrupts list under its tenant)
if #auth > 0 then
  redis.call('HSET', KEYS[7], unpack(auth))
  redis.call('HSET', KEYS[8], unpack(auth))
end
keep_summary(KEYS[8], ARGV[14], ARGV[8])
xadd(KEYS[9], ARGV[7], 'run.started', ARGV[15])
redis.call('ZADD', KEYS[10], ARGV[3], ARGV[5] .. ':0:0')
expire_all(ARGV[14], {KEYS[7], KEYS[9]})
hand_off({KEYS[12], KEYS[13]}, ARGV, 20, 0, 0)
return fence
