-- Commit a pause: store the interrupt in the run's own record, index it, release the lease,
-- publish the interrupt event, note the pause on the pause feed (what waiting listings block on).
-- The interrupt lives in the run hash (no key of its own, no pending key): its token field names
-- it, its status field says whether it can still be answered (with the run's `expires`), and its
-- record is split into fields of at most PART_BYTES so the hash keeps Redis's compact encoding.
-- The run's records live `grace` ms past the interrupt so the reconciler can still record its expiry.
-- K and A: park.lua's KEYS and ARGV by name (first.lua parks with the ones it carries).
local function park(K, A)
  local cur, err = check_fence(K.run, A.fence, {'running'})
  if not cur then return err end
  if cur[3] ~= A.step then return stale('run is at step ' .. cur[3]) end
  redis.call('ZADD', K.newest, 0, A.member_newest)
  redis.call('ZADD', K.expiring, 0, A.member_expiring)
  for _, index in ipairs(K.filters) do redis.call('ZADD', index, 0, A.member_newest) end
  redis.call('SADD', K.workflows, A.workflow)
  redis.call('ZREM', K.leases, A.run_id)
  if A.paused ~= '' then redis.call('HSET', K.run, 'paused', A.paused) end
  local fence = redis.call('HINCRBY', K.run, 'fence', 1)
  -- the run's latest record (its interrupt before this one, answered or expired) keeps its parts
  -- under names of its own, r:<req>:<i>, for reads by request id; the new one takes r0, r1, ...
  local before = redis.call('HMGET', K.run, 'rq', 'rn')
  if before[1] then
    for i = 0, tonumber(before[2]) - 1 do
      redis.call('HSET', K.run, 'r:' .. before[1] .. ':' .. i, redis.call('HGET', K.run, 'r' .. i))
      redis.call('HDEL', K.run, 'r' .. i)
    end
  end
  -- the token field names the interrupt as rq does (its request id without the run id)
  redis.call('HSET', K.run, 'status', 'waiting', 'waiting', A.request_id, 'expires', A.expires, 'updated', A.now,
    'crashes', 0, A.token_field, A.short_id, A.status_field, 'pending', unpack(A.record))
  -- a new pause: the interrupt answered before it (if any) did not fail its replay
  redis.call('HDEL', K.run, 'ans')
  xadd_run(K.run, K.events, A.maxlen, 'interrupt', A.event)
  for _, a in ipairs(K.ancestors) do xadd_run(a.run, a.events, A.maxlen, 'interrupt', A.ancestor_event) end
  redis.call('XADD', K.pauses, 'MAXLEN', '~', A.pauses_maxlen, '*', 'w', A.workflow, 'r', A.run_id)
  local keep_ms = tonumber(A.ttl) + tonumber(A.grace)
  local left = keep_records(K.run, keep_ms, {K.run, K.journal, K.state, K.snapshots}, K.summary, A.retention)
  -- its few events move into its hash while it waits, the stream gone in FOLD_WAKE_MS (see fold in
  -- _common.lua); else the stream lives as long as the run, rebuilt at its real size: Redis 7.0
  -- allocates a stream's first node at stream-node-max-bytes (4 KiB) however few entries it holds,
  -- and a parked run may wait for hours
  if not fold(K.run, K.events) then
    local stream = redis.call('DUMP', K.events)
    redis.call('DEL', K.events)
    redis.call('RESTORE', K.events, left, stream)
  end
  keep_ancestors(K.ancestors, keep_ms, A.retention)
  return fence
end
