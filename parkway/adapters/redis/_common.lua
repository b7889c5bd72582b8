-- Shared by every script (prepended when loading).
local function stale(msg) return redis.error_reply('STALE ' .. msg) end
-- no run under that id (its records expired, or the id was never a run's): a stale fence too
local function gone() return redis.error_reply('STALE GONE run is gone') end

-- Check that the run exists, is at `fence` and in one of `statuses`.
local function check_fence(run_key, fence, statuses)
  local cur = redis.call('HMGET', run_key, 'fence', 'status', 'step')
  if not cur[1] then return nil, gone() end
  if cur[1] ~= fence then return nil, stale('run is at fence ' .. cur[1] .. ', the job has ' .. fence) end
  for _, s in ipairs(statuses) do
    if cur[2] == s then return cur end
  end
  return nil, stale('run is ' .. cur[2])
end

local function expire_all(ttl, keys)
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ttl) end
end

-- The summary outlives the run's records by the retention (so an expired run reads expired, not
-- unknown): every script that renews the records renews it with them.
local function keep_summary(summary, records_ttl, retention)
  redis.call('PEXPIRE', summary, tonumber(records_ttl) + tonumber(retention))
end

-- The records' remaining life, for scripts that end a run without renewing them.
local function records_left(run_key)
  local left = redis.call('PTTL', run_key)
  if left < 0 then return 0 end
  return left
end

-- A child run's interrupt keeps its ancestors' records at least `held` ms: from KEYS[at] to
-- KEYS[last], ANCESTOR_KEYS keys per ancestor (events, run, journal of the step waiting, workflow
-- state, summary, fan-out set: a fan-out's child must find itself there when it ends).
local ANCESTOR_KEYS = 6
local function keep_ancestors(at, last, held, retention)
  for i = at, last, ANCESTOR_KEYS do
    if redis.call('PTTL', KEYS[i + 1]) < held then
      expire_all(held, {KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], KEYS[i + 5]})
      keep_summary(KEYS[i + 4], held, retention)
    end
  end
end

-- Write `blob` in a hash as parts of at most 64 bytes, `field:0`, `field:1`, ... (so the hash keeps
-- Redis's compact encoding: keys.PART_BYTES), and drop the parts a longer blob written there left.
local function hset_parts(key, field, blob)
  local n = math.max(1, math.ceil(#blob / 64))
  for i = 0, n - 1 do redis.call('HSET', key, field .. ':' .. i, string.sub(blob, i * 64 + 1, (i + 1) * 64)) end
  while redis.call('HDEL', key, field .. ':' .. n) == 1 do n = n + 1 end
end

local function xadd(stream, maxlen, kind, blob)
  return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 't', kind, 'd', blob)
end

-- A parked run's few events live in its hash, not in a stream of their own (a Redis stream costs
-- ~750 bytes however small): park copies them there, each in one field `~<i>` (from 0, in order)
-- holding `<entry id> <type length as one byte><type><data>`, when they are at most FOLD_MAX and
-- each fits in 64 bytes (keys.PART_BYTES: the hash stays a listpack); else the stream stays whole.
-- The stream itself then lives FOLD_WAKE_MS more, not deleted at once: Redis serves the readers
-- blocked on it (XREAD BLOCK) the new interrupt event when the park script ends, and a deleted key
-- would leave them blocked. Readers read both, an entry once (store.read_events); whatever appends
-- to the run's stream unfolds first (xadd_run): the entries go back with their ids (those still in
-- the stream stay), so the stream reads as if it had never moved.
local FOLD_MAX = 8
local FOLD_WAKE_MS = 1000
local function fold(run, stream)
  local entries = redis.call('XRANGE', stream, '-', '+', 'COUNT', FOLD_MAX + 1)
  if #entries == 0 or #entries > FOLD_MAX then return false end
  local pairs_out = {}
  for i, e in ipairs(entries) do
    local f = e[2]
    if #f ~= 4 or f[1] ~= 't' or f[3] ~= 'd' or #f[2] > 255 then return false end
    local v = e[1] .. ' ' .. string.char(#f[2]) .. f[2] .. f[4]
    if #v > 64 then return false end
    pairs_out[#pairs_out + 1] = '~' .. (i - 1)
    pairs_out[#pairs_out + 1] = v
  end
  redis.call('HSET', run, unpack(pairs_out))
  redis.call('PEXPIRE', stream, FOLD_WAKE_MS)
  return true
end

-- Put the events park folded into the run's hash back in its stream, with their ids (nothing when
-- none are folded). Those the stream still holds (within FOLD_WAKE_MS of the park) stay; an entry
-- someone appended to the stream behind parkway's back wins: folded entries not newer than it are
-- dropped (a stream's ids only grow).
local FOLDED = {}
for i = 0, FOLD_MAX - 1 do FOLDED[#FOLDED + 1] = '~' .. i end
local function unfold(run, stream)
  if not redis.call('HGET', run, '~0') then return end  -- the usual case: nothing folded
  local got = redis.call('HMGET', run, unpack(FOLDED))
  local held = {}
  for i, entry in ipairs(got) do  -- in order, up to the first field not there
    if not entry then break end
    local sp = string.find(entry, ' ', 1, true)
    local n = string.byte(entry, sp + 1)
    redis.pcall('XADD', stream, string.sub(entry, 1, sp - 1), 't', string.sub(entry, sp + 2, sp + 1 + n),
      'd', string.sub(entry, sp + 2 + n))
    held[i] = FOLDED[i]
  end
  redis.call('HDEL', run, unpack(held))
  local left = redis.call('PTTL', run)
  if left > 0 then redis.call('PEXPIRE', stream, left) end
end

-- Append to a run's stream (`run`: its hash), unfolding its parked events first (see fold).
local function xadd_run(run, stream, maxlen, kind, blob)
  unfold(run, stream)
  return xadd(stream, maxlen, kind, blob)
end

-- msgpack of a non-negative integer, in the shortest form (as msgpack-python writes it).
local function mp_uint(n)
  n = tonumber(n)
  local function be(v, width)
    local out = {}
    for i = width, 1, -1 do
      out[i] = string.char(v % 256)
      v = math.floor(v / 256)
    end
    return table.concat(out)
  end
  if n < 128 then return string.char(n) end
  if n < 256 then return '\204' .. be(n, 1) end
  if n < 65536 then return '\205' .. be(n, 2) end
  if n < 4294967296 then return '\206' .. be(n, 4) end
  return '\207' .. be(math.floor(n / 4294967296), 4) .. be(n % 4294967296, 4)
end

-- Enqueue the job that carries the transition on, for the `step` and `fence` this script just
-- wrote: hand_off(keys, args, at, step, fence, last), where `keys` are the job's two keys and
-- `args` from `at` (to `last`, else to the end) its arguments ('' = enqueue nothing); returns 1 if
-- it enqueued. Its body is the job format's, not the store's: it is assigned after this file, from
-- the store's NextJob (parkway/workers/rq_internals/hand_off.lua, generated from RQ's job format).
local hand_off

-- Queue a parent run at a new fence for a replay of its `step` (its outbox entry and its job: see
-- hand_off), renewing its records. `k`: its run, journal, workflow state, events, summary, outbox,
-- then its job's queues; `args` from `at` (to `last`, else to the end): its job (see hand_off).
local function queue_parent(k, parent, step, now, retention, args, at, last)
  local fence = redis.call('HINCRBY', k[1], 'fence', 1)
  redis.call('HSET', k[1], 'status', 'queued', 'waiting', '', 'expires', '', 'updated', now)
  redis.call('ZADD', k[6], now, parent .. ':' .. step .. ':' .. fence)
  local ttl = redis.call('HGET', k[1], 'ttl')
  expire_all(ttl, {k[1], k[2], k[3], k[4]})
  keep_summary(k[5], ttl, retention)
  return hand_off({k[7], k[8]}, args, at, step, fence, last)
end

-- A child run ended: record its outcome in its parent's journal and queue the parent, exactly
-- once (only a parent still waiting on this child, or on the interrupt it races, moves). Called by every script that ends a run
-- (advance, finish, recover, expire) as its last step; a root run passes '' and nothing happens.
-- A child of a fan-out (use_workflows: it is in the parent's fan-out set) records its outcome
-- whatever its parent is doing (a replay in flight sees it when it parks again: fanout.lua), and
-- queues the parent only when it waits on its children and either none is left running or some
-- are left to start; its own records then go (its summary stays: a finished fan-out child keeps
-- a few hundred bytes, its output being in the parent's journal).
-- KEYS from `kat`: parent run, parent journal (of the step waiting), parent workflow state,
--   parent events, parent summary, outbox, parent fan-out set, the child's run, events, workflow
--   state, snapshots and journal of its last step, then the parent's next job's queues (see hand_off)
-- ARGV from `at` ('' = the run has no parent): parent run id, child run id, journal field,
--   journal entry blob, event type, event blob, now, maxlen, retention ms, then the next job
local function notify_parent(kat, at)
  if ARGV[at] == '' then return 0 end
  local prun = KEYS[kat]
  local parent_keys = {prun, KEYS[kat + 1], KEYS[kat + 2], KEYS[kat + 3], KEYS[kat + 4], KEYS[kat + 5],
    KEYS[kat + 12], KEYS[kat + 13]}
  local cur = redis.call('HMGET', prun, 'status', 'waiting', 'step', 'rc', 'rs', 'expires', 'fl')
  if redis.call('SREM', KEYS[kat + 6], ARGV[at + 1]) == 1 then
    redis.call('DEL', KEYS[kat + 7], KEYS[kat + 8], KEYS[kat + 9], KEYS[kat + 10], KEYS[kat + 11])
    if cur[1] ~= 'queued' and cur[1] ~= 'running' and cur[1] ~= 'waiting' then return 0 end
    redis.call('HSET', KEYS[kat + 1], ARGV[at + 2], ARGV[at + 3])
    xadd_run(prun, KEYS[kat + 3], ARGV[at + 7], ARGV[at + 4], ARGV[at + 5])
    if cur[1] ~= 'waiting' or cur[2] ~= 'children' then return 0 end
    if redis.call('SCARD', KEYS[kat + 6]) > 0 and tonumber(cur[7] or '0') == 0 then return 0 end
    return queue_parent(parent_keys, ARGV[at], cur[3], ARGV[at + 6], ARGV[at + 8], ARGV, at + 9)
  end
  -- a child racing the interrupt the parent waits on (use_first, first.lua) wins while it is pending
  -- and before its deadline (the timer's: past it the timer came first, and the reconciler says so)
  local raced = cur[1] == 'waiting' and cur[4] == ARGV[at + 1] and redis.call('HGET', prun, cur[5]) == 'pending'
    and tonumber(ARGV[at + 6]) < (tonumber(cur[6]) or 0)
  if not raced and (cur[1] ~= 'waiting' or cur[2] ~= 'child:' .. ARGV[at + 1]) then return 0 end
  if raced then redis.call('HSET', prun, cur[5], 'cancelled') end  -- its token now answers nothing
  redis.call('HSET', KEYS[kat + 1], ARGV[at + 2], ARGV[at + 3])
  xadd_run(prun, KEYS[kat + 3], ARGV[at + 7], ARGV[at + 4], ARGV[at + 5])
  return queue_parent(parent_keys, ARGV[at], cur[3], ARGV[at + 6], ARGV[at + 8], ARGV, at + 9)
end

-- Whose a run is: written on the run and its summary when it is created and never changed after, so
-- every access checks these and nothing derives them later (from an id a caller chose, or a
-- session that may have expired). Each absent for none: tenant, owner (a user's runs and a
-- session's branch runs), origin (the rank of the caller that started it: system, machine,
-- frontend), session (a branch run's). A child run and a fork copy their run's.
local AUTHORITY = {'tenant', 'owner', 'origin', 'session'}

-- The authority fields `hash` holds, as a flat list of field, value (for HSET).
local function authority_of(hash)
  local values = redis.call('HMGET', hash, unpack(AUTHORITY))
  local out = {}
  for i, name in ipairs(AUTHORITY) do
    if values[i] and values[i] ~= '' then
      out[#out + 1] = name
      out[#out + 1] = values[i]
    end
  end
  return out
end

-- The authority an argument gives, `tenant=<id> owner=<id> ...` (codec.authority_arg), as a flat list.
local function authority_arg(text)
  local out = {}
  for name, value in string.gmatch(text, '(%a+)=([%w_-]+)') do
    out[#out + 1] = name
    out[#out + 1] = value
  end
  return out
end

-- Create a queued run with its summary, its run.started event and outbox entry, and queue its
-- first job (node.started is the job's, written when a worker begins the node: begin.lua); nil
-- when the run id is taken. `k`: run, summary, events, outbox, then the job's queues (see
-- hand_off). From A[a]: workflow, ref, start node, input blob, ttl ms, now, retention ms, maxlen,
-- run.started blob, outbox member; the job's args from A[job_at] (to A[job_last], else to the end).
-- `auth` (authority_of, authority_arg): whose the run is, kept in its summary too, so a caller
-- bound to another tenant or owner is refused the run after its records expire as well.
local function create_run(k, A, a, job_at, job_last, auth)
  if redis.call('EXISTS', k[1]) == 1 or redis.call('EXISTS', k[2]) == 1 then return nil end
  redis.call('HSET', k[1], 'wf', A[a], 'ref', A[a + 1], 'status', 'queued', 'node', A[a + 2],
    'step', 0, 'fence', 0, 'input', A[a + 3], 'created', A[a + 5], 'updated', A[a + 5],
    'ttl', A[a + 4])
  redis.call('HSET', k[2], 'wf', A[a], 'status', 'queued', 'created', A[a + 5], 'updated', A[a + 5])
  if #auth > 0 then
    redis.call('HSET', k[1], unpack(auth))
    redis.call('HSET', k[2], unpack(auth))
  end
  keep_summary(k[2], A[a + 4], A[a + 6])
  xadd(k[3], A[a + 7], 'run.started', A[a + 8])
  redis.call('ZADD', k[4], A[a + 5], A[a + 9])
  expire_all(A[a + 4], {k[1], k[3]})
  return hand_off({k[5], k[6]}, A, job_at, 0, 0, job_last)
end
