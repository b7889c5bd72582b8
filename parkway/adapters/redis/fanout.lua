-- A node called use_workflows: start the next children of its fan-out (as many as its bound lets
-- run), each created with its first job and added to the parent's fan-out set, and park the parent
-- on them, in one step (a tree shares one hash tag: every run's keys are in this slot). A child's end
-- records its outcome in the parent's journal and leaves the set (notify_parent in _common.lua).
-- The attempt counted `live` children started and not ended in the journal it read; when the set
-- holds fewer than that plus the new ones, some ended since: their ends found the parent running
-- and queued nothing, so the parent is queued again now instead of parked (its replay reads them).
-- KEYS: 1 parent run, 2 parent journal, 3 parent workflow state, 4 parent events, 5 parent summary,
--       6 leases, 7 outbox, 8 parent snapshots (see advance.lua), 9 parent fan-out set, 10-11 the
--       queues of every job this script enqueues (see hand_off), then 3 per new child: its run,
--       summary, events
-- ARGV: 1 fence, 2 step, 3 now, 4 parent run id, 5 maxlen, 6 retention ms, 7 grace ms, 8 live,
--       9 children left to start after these, 10 n (new children), 11 m (arguments per child),
--       12 k (arguments of the parent's job), 13.. the parent's job (k, see hand_off), then n
--       blocks of m: child run id, workflow, ref, start node, input blob, ttl ms, run.started blob,
--       journal field in the parent (w:<id>), lineage (see spawn.lua), the child check's journal
--       field (c:<id>), its entry, child.started blob (the parent's stream), then its first job
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
local now, n, m, k = ARGV[3], tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local parent = ARGV[4]
redis.call('ZREM', KEYS[6], parent)
-- the parent outlives its children's records (each child has the parent's TTL from now)
local held = tonumber(redis.call('HGET', KEYS[1], 'ttl')) + tonumber(ARGV[7])
local tenant = redis.call('HGET', KEYS[1], 'tenant')  -- a child lists under its tree's tenant
for i = 0, n - 1 do
  local a, c = 13 + k + i * m, 12 + i * 3
  local child = ARGV[a]
  if redis.call('EXISTS', KEYS[c]) == 0 and redis.call('EXISTS', KEYS[c + 1]) == 0 then
    redis.call('HSET', KEYS[c], 'wf', ARGV[a + 1], 'ref', ARGV[a + 2], 'status', 'queued', 'node', ARGV[a + 3],
      'step', 0, 'fence', 0, 'input', ARGV[a + 4], 'created', now, 'updated', now, 'ttl', ARGV[a + 5],
      'parent', parent, 'pstep', ARGV[2], 'pfield', ARGV[a + 7], 'lineage', ARGV[a + 8])
    redis.call('HSET', KEYS[c + 1], 'wf', ARGV[a + 1], 'status', 'queued', 'created', now, 'updated', now)
    if tenant then
      redis.call('HSET', KEYS[c], 'tenant', tenant)
      redis.call('HSET', KEYS[c + 1], 'tenant', tenant)
    end
    keep_summary(KEYS[c + 1], ARGV[a + 5], ARGV[6])
    xadd(KEYS[c + 2], ARGV[5], 'run.started', ARGV[a + 6])
    redis.call('ZADD', KEYS[7], now, child .. ':0:0')
    expire_all(ARGV[a + 5], {KEYS[c], KEYS[c + 2]})
    hand_off({KEYS[10], KEYS[11]}, ARGV, a + 12, 0, 0, a + m - 1)
    redis.call('SADD', KEYS[9], child)
    redis.call('HSET', KEYS[2], ARGV[a + 9], ARGV[a + 10])
    xadd_run(KEYS[1], KEYS[4], ARGV[5], 'child.started', ARGV[a + 11])
  end
end
redis.call('HSET', KEYS[1], 'fl', ARGV[9], 'crashes', 0, 'updated', now)
if redis.call('SCARD', KEYS[9]) < tonumber(ARGV[8]) + n then
  local keys_ = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7], KEYS[10], KEYS[11]}
  queue_parent(keys_, parent, ARGV[2], now, ARGV[6], ARGV, 13, 12 + k)
  expire_all(held, {KEYS[9]})
  return {'queued', redis.call('HGET', KEYS[1], 'fence')}
end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'status', 'waiting', 'waiting', 'children', 'expires', '')
expire_all(held, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[8], KEYS[9]})
keep_summary(KEYS[5], held, ARGV[6])
return {'waiting', fence}
