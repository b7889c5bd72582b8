-- Shared by the session scripts (the loader sends it after _common.lua to every script whose
-- header names a session block). A session's keys share its hash tag with its branch runs
-- (keys.py: a run id made of the session's and a suffix), so a script may read and move both.
-- BLOCK session: the session's keys, which every session script takes first (each transition
-- renews them all, so a session's records expire together)
-- KEYS
--   hash           the session's hash (agent, owner, tenant, head, ttl, ...)
--   messages       its messages by id
--   up             each message's parent
--   open           its open session-level interrupts (id -> anchor, '' = global)
--   interrupts     every interrupt's record, open or cleared
--   deliveries     answers kept for abandoned branches (request id -> run id)
--   live           its live branch runs (run id -> leaf)
--   events         its stream

-- BLOCK live: a live branch run of the session, as the caller read the live set
-- KEYS
--   run            its hash
-- ARGV
--   run_id         its id

-- BLOCK live_at: a live branch run of the session, as the caller read it, with what waking it takes
-- KEYS
--   run            its hash
--   events         its stream
--   journal        its journal at the step read
-- ARGV
--   #job           how many job arguments
--   run_id         its id
--   step           its step as read
--   job...         its next job, if it is woken (see hand_off)

-- BLOCK kept: a trigger kept while the path it is due on was parked (session_clear)
-- ARGV
--   seq            its place in clearing order (the session hash's `t:<seq>`)
--   entry          its journal entry blob
--   event          its interrupt.resumed blob

-- BLOCK delivery: an answer the session kept for a branch, delivered when its path is active again
-- KEYS
--   resume?: resume  the answer's resume call (absent: the caller found it undeliverable)
-- ARGV
--   #resume        1, or 0 when the caller found it undeliverable
--   request_id     the interrupt answered
--   run_id         its run
--   delivered      interrupt.delivered blob
--   undelivered    interrupt.undelivered blob
--   resume?: resume  (see KEYS)

-- The session's TTL (nil when the session is gone). `S`: a session block's keys.
local function session_ttl(S)
  local ttl = redis.call('HGET', S.hash, 'ttl')
  if ttl then return ttl end
  return nil
end

-- Renew every key of the session, and note the time of this transition.
local function touch(S, ttl, now)
  if now then redis.call('HSET', S.hash, 'updated', now) end
  expire_all(ttl, {S.hash, S.messages, S.up, S.open, S.interrupts, S.deliveries, S.live, S.events})
end

local ENDED = {completed = true, failed = true, cancelled = true, expired = true}

-- Whose a branch run of the session `session_id` is: the session's owner and tenant, and the
-- session (create_run's `auth`: its children and its summary keep them too).
local function session_authority(S, session_id)
  local found = redis.call('HMGET', S.hash, 'owner', 'tenant')
  return {'owner', found[1], 'tenant', found[2], 'origin', 'frontend', 'session', session_id}
end

-- A new branch run's own record of the message it answers (its path ends there): `leaf`, on the
-- branch run only (a child's record has its session, from the authority, but no leaf).
local function set_leaf(run_key, leaf)
  redis.call('HSET', run_key, 'leaf', leaf)
end

-- The messages on the path from the root to `leaf`, as a set ('' = the empty path).
local function path_of(up, leaf)
  local on, m, n = {}, leaf, 0
  while m and m ~= '' and n < 100000 do
    on[m] = true
    n = n + 1
    m = redis.call('HGET', up, m)
  end
  return on
end

-- The session's live branch runs, as the caller read them (`keys`, `args`: live or live_at
-- blocks' keys and arguments, in the same order): run id -> {key, leaf, status, waiting, step, k,
-- a} (`k`, `a`: its block's). Runs that ended leave the live set here. nil when the caller's list
-- is not the live set (it read it before a concurrent change: it reads again and retries).
local function live_runs(live_key, keys, args)
  local listed = redis.call('HGETALL', live_key)
  if #listed ~= 2 * #args then return nil end
  local runs = {}
  for i = 1, #listed, 2 do runs[listed[i]] = {leaf = listed[i + 1]} end
  for j, a in ipairs(args) do
    local r = runs[a.run_id]
    if not r then return nil end
    local key = keys[j].run
    local cur = redis.call('HMGET', key, 'status', 'waiting', 'step')
    r.key, r.status, r.waiting, r.step = key, cur[1], cur[2], cur[3]
    r.k, r.a = keys[j], a
  end
  for id, r in pairs(runs) do
    if not r.status or ENDED[r.status] then
      redis.call('HDEL', live_key, id)
      runs[id] = nil
    end
  end
  return runs
end

-- What parks the path `on` (a set from path_of): open session-level interrupts anchored on it
-- (or global, anchor ''), and interrupts of live runs on it still waiting for an answer
-- (request ids 'int_...' or, minted by parkway, 'i<n>_<nonce>_<run id>': those starting with 'i';
-- not deferred tools, 'tool_...', nor 'session' or 'child:...'; not those cleared while abandoned).
local function parking(open_key, dl_key, runs, on)
  local by = {}
  local open = redis.call('HGETALL', open_key)
  for i = 1, #open, 2 do
    if open[i + 1] == '' or on[open[i + 1]] then by[#by + 1] = open[i] end
  end
  for _, r in pairs(runs) do
    if r.status == 'waiting' and r.waiting and string.sub(r.waiting, 1, 1) == 'i' and on[r.leaf]
        and redis.call('HEXISTS', dl_key, r.waiting) == 0 then
      by[#by + 1] = r.waiting
    end
  end
  return by
end
