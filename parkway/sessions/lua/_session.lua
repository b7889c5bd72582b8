-- Shared by the session scripts (prepended after _common.lua). A session's keys share its hash
-- tag with its branch runs (keys.py: a run id made of the session's and a suffix), so a script may
-- read and move both.
-- Every session script takes the session's eight keys first, in this order (KEYS[1..8]), then its
-- own; each transition renews all eight, so a session's records expire together.
local S = {s = KEYS[1], m = KEYS[2], up = KEYS[3], open = KEYS[4], i = KEYS[5], dl = KEYS[6],
  live = KEYS[7], sev = KEYS[8]}
local SESSION_KEYS = 8

-- The session's TTL (nil when the session is gone).
local function session_ttl()
  local ttl = redis.call('HGET', S.s, 'ttl')
  if ttl then return ttl end
  return nil
end

-- Renew every key of the session, and note the time of this transition.
local function touch(ttl, now)
  if now then redis.call('HSET', S.s, 'updated', now) end
  expire_all(ttl, {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]})
end

local ENDED = {completed = true, failed = true, cancelled = true, expired = true}

-- Whose a branch run of the session `session_id` is: the session's owner and tenant, and the
-- session (create_run's `auth`: its children and its summary keep them too).
local function session_authority(session_id)
  local found = redis.call('HMGET', S.s, 'owner', 'tenant')
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

-- The session's live branch runs, given as ARGV[at .. at+count-1] (run ids) with their run hashes
-- as KEYS[kat], KEYS[kat + stride], ...: run id -> {key, leaf, status, waiting, step, index}. Runs that ended leave the live set
-- here. nil when the caller's list is not the live set (it read it before a concurrent change:
-- it reads again and retries).
local function live_runs(live_key, kat, at, count, stride)
  local listed = redis.call('HGETALL', live_key)
  if #listed ~= 2 * count then return nil end
  local runs = {}
  for i = 1, #listed, 2 do runs[listed[i]] = {leaf = listed[i + 1]} end
  for j = 0, count - 1 do
    local r = runs[ARGV[at + j]]
    if not r then return nil end
    local key = KEYS[kat + j * (stride or 1)]
    local cur = redis.call('HMGET', key, 'status', 'waiting', 'step')
    r.key, r.status, r.waiting, r.step = key, cur[1], cur[2], cur[3]
    r.index = j
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
