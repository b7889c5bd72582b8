-- Commit a pause: store the interrupt in the run's own record, index it, release the lease,
-- publish the interrupt event, note the pause on the pause feed (what waiting listings block on).
-- The interrupt lives in the run hash (no key of its own, no pending key): its token field names
-- it, its status field says whether it can still be answered (with the run's `expires`), and its
-- record is split into fields of at most PART_BYTES so the hash keeps Redis's compact encoding.
-- The run's records live `grace` ms past the interrupt so the reconciler can still record its expiry.
-- K and A: park.lua's KEYS and ARGV by name (first.lua parks with the ones it carries).

-- A pause in a run below a root run (a child, a grandchild, a fan-out's or a use_first race's child)
-- makes the root's step it sits below a gate: a fork of the root past that step must ask again
-- (parkway.runtime.authority). The root is the last ancestor; its summary, alive while it waits on
-- the runs below, keeps the mark as long as the root's own lifecycle records (never created here).
local function mark_gate(root, gate)
  if root == nil or gate == '' or redis.call('EXISTS', root.summary) == 0 then return end
  redis.call('HSET', root.summary, P.gate .. gate, 1)
end

local function park(K, A)
  local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step, F.rq, F.rn, F.ans, F.folded_first, F.created, F.cr, F.until_ms, F.crashes, F.wf, F.input, F.tenant, F.fmt, F.node}), A.fence, {'running'})
  if not cur then return err end
  if cur.step ~= A.step then return stale('run is at step ' .. cur.step) end
  local bucketed = bucketed_arg(A.buckets)
  ix_add(K.newest, A.member_newest, bucketed)
  ix_add(K.expiring, A.member_expiring, bucketed)
  for _, index in ipairs(K.filters) do ix_add(index, A.member_newest, bucketed) end
  redis.call('SADD', K.workflows, A.workflow)
  redis.call('ZREM', K.leases, A.run_id)
  local fence = tonumber(cur.fence) + 1
  -- what the run's hash takes, in one HSET: the token field and waiting name the interrupt as rq
  -- does (its request id without the run id); a crash count is reset (no count reads 0: a run that
  -- never crashed has none)
  -- format 4 (layout.py's "Formats") keeps no `paused` (the latest record has its step and version:
  -- attempt_fields returns it), `updated` in ms after `cr`, and its folded events shorter (folded_head)
  local trimmed = (tonumber(cur.fmt) or 1) >= 4
  local updated, born = A.now, tonumber(cur.cr)
  if trimmed and born and tonumber(A.now) >= born then updated = tonumber(A.now) - born end
  local fields = {F.status, V.waiting, F.waiting, A.short_id, F.expires, A.expires, F.updated, updated,
    F.fence, fence, A.token_field, A.short_id, A.status_field, 'pending'}
  if cur.crashes and cur.crashes ~= '0' then fields[#fields + 1], fields[#fields + 2] = F.crashes, 0 end
  if A.paused ~= '' and not trimmed then fields[#fields + 1], fields[#fields + 2] = F.paused, A.paused end
  -- the run's latest record (its interrupt before this one, answered or expired) keeps its parts
  -- under names of its own, r:<req>:<i>, for reads by request id; the new one takes r0, r1, ...
  local dropped = {}
  if cur.rq then
    local names = {}
    for i = 0, tonumber(cur.rn) - 1 do names[#names + 1] = P.record .. i end
    local parts = redis.call('HMGET', K.run, unpack(names))
    for i, name in ipairs(names) do
      fields[#fields + 1], fields[#fields + 2] = P.earlier .. cur.rq .. ':' .. (i - 1), parts[i]
      dropped[name] = true
    end
  end
  for i = 1, #A.record, 2 do
    fields[#fields + 1], fields[#fields + 2] = A.record[i], A.record[i + 1]
    dropped[A.record[i]] = nil
  end
  -- a new pause: the interrupt answered before it (if any) did not fail its replay
  local drop = {}
  if cur.ans then drop[#drop + 1] = F.ans end
  for name in pairs(dropped) do drop[#drop + 1] = name end
  xadd_run(K.run, K.events, A.maxlen, 'interrupt', A.event, cur.folded_first, cur.wf, cur.input)
  for _, a in ipairs(K.ancestors) do xadd_run(a.run, a.events, A.maxlen, 'interrupt', A.ancestor_event) end
  -- `c`: the run's creation, so a reader tells this run's pause from one an earlier holder of its id made;
  -- `t`: its tenant ('' for none), so a waiting listing of another tenant is not woken (layout.pause_wakes)
  redis.call('XADD', K.pauses, 'MAXLEN', '~', A.pauses_maxlen, '*', 'w', A.workflow, 'r', A.run_id, 'c', cur.created or cur.cr or '',
    't', cur.tenant or '')
  -- its few events move into its hash while it waits, the stream gone in FOLD_WAKE_MS (see fold_fields in
  -- _common.lua); else the stream lives as long as the run, rebuilt at its real size: Redis 7.0
  -- allocates a stream's first node at stream-node-max-bytes (4 KiB) however few entries it holds,
  -- and a parked run may wait for hours
  local h = trimmed and {cr = cur.cr, node = cur.node, step = cur.step, rq = A.short_id} or nil
  local folded = fold_fields(K.events, fields, cur.wf, cur.input, h)
  local keep_ms = tonumber(A.ttl) + tonumber(A.grace)
  local left, _, known = keep_records(K.run, keep_ms, {K.run, K.journal, K.state, K.snapshots}, K.summary,
    A.retention, A.now, cur.until_ms)
  if known then fields[#fields + 1], fields[#fields + 2] = F.until_ms, known end
  redis.call('HSET', K.run, unpack(fields))
  if #drop > 0 then redis.call('HDEL', K.run, unpack(drop)) end
  if folded then
    redis.call('PEXPIRE', K.events, FOLD_WAKE_MS)
  else
    local stream = redis.call('DUMP', K.events)
    redis.call('DEL', K.events)
    redis.call('RESTORE', K.events, left, stream)
  end
  keep_ancestors(K.ancestors, keep_ms, A.retention)
  notice(K.notice, 'raised', A.run_id, A.request_id, A.workflow, A.expires)
  mark_gate(K.ancestors[#K.ancestors], A.gate)
  return fence
end
