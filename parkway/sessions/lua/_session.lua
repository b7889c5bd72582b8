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
--   path           the active path: a list of the messages from the first to the head (its
--                  length in the hash's `pd`), kept by the scripts that move the head (move_head)
--   ended          its ended branch runs' summaries, folded (fold_summary)

-- BLOCK live: a live branch run of the session, as the caller read the live set
-- KEYS
--   run            its hash
--   events         its stream
--   snapshots      its snapshots
--   summary        its summary
-- ARGV
--   run_id         its id

-- BLOCK live_at: a live branch run of the session, as the caller read it, with what waking it takes
-- KEYS
--   run            its hash
--   events         its stream
--   snapshots      its snapshots
--   summary        its summary
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
  local ttl = redis.call('HGET', S.hash, F.ttl)
  if ttl then return ttl end
  return nil
end

-- Renew every key of the session, and note the time of this transition.
local function touch(S, ttl, now)
  if now then redis.call('HSET', S.hash, F.updated, now) end
  expire_all(ttl, {S.hash, S.messages, S.up, S.open, S.interrupts, S.deliveries, S.live, S.events, S.path, S.ended})
end

-- Append an event to the session's stream, stamped (`i`) with the session's incarnation (the nonce
-- session_open wrote): a reader that follows one incarnation drops what another wrote under its id.
local function sxadd(S, maxlen, kind, blob)
  local inc = redis.call('HGET', S.hash, F.inc) or ''
  return redis.call('XADD', S.events, 'MAXLEN', '~', maxlen, '*', 't', kind, 'd', blob, 'i', inc)
end

local ENDED = {completed = true, failed = true, cancelled = true, expired = true}

-- Whose a branch run of the session `session_id` is: the session's owner and tenant, and the
-- session (create_run's `auth`: its children and its summary keep them too).
local function session_authority(S, session_id)
  local found = hmget(S.hash, {F.owner, F.tenant})
  return {F.owner, found.owner, F.tenant, found.tenant, F.origin, 'frontend', F.session, session_id}
end

-- A new branch run's own record of the message it answers (its path ends there): `leaf`, on the
-- branch run only (a child's record has its session, from the authority, but no leaf).
local function set_leaf(run_key, leaf)
  redis.call('HSET', run_key, F.leaf, leaf)
end

-- The active path's length (the head's depth, the session hash's `pd`). A session whose path was
-- kept before as a hash (`hd`, and a `path` key left to expire) or not at all has its list built
-- here, once, from `up`.
local function head_depth(S)
  local d = redis.call('HGET', S.hash, F.pd)
  if d then return tonumber(d) end
  local ids, m = {}, redis.call('HGET', S.hash, F.head) or ''
  while m ~= '' and #ids < 100000 do
    ids[#ids + 1] = m
    m = redis.call('HGET', S.up, m) or ''
  end
  redis.call('DEL', S.path)
  for i = #ids, 1, -1 do redis.call('RPUSH', S.path, ids[i]) end
  redis.call('HSET', S.hash, F.pd, #ids)
  redis.call('HDEL', S.hash, F.hd)
  -- the session's TTL now (a script that returns before its touch would leave none)
  if #ids > 0 then redis.call('PEXPIRE', S.path, redis.call('PTTL', S.hash)) end
  return #ids
end

-- The depth of `m` on the active path (1: a first message), nil when it is not on it: its place in
-- the path's list, searched from the head's end (a message near the head, the usual one asked
-- about, is found at once; a message is on a path once at most).
local function path_depth(S, m)
  local i = redis.call('LPOS', S.path, m, 'RANK', -1)
  if i then return i + 1 end
  return nil
end

-- From `m` up to the active path: the messages of `m`'s branch off it (a set), and the depth of
-- the deepest message `m`'s path shares with it (0: none). Walks only the part off the active path.
local function off_path(S, m)
  head_depth(S)
  local own, n = {}, 0
  while m ~= '' and n < 100000 do
    local d = path_depth(S, m)
    if d then return own, d, n end
    own[m] = true
    n = n + 1
    m = redis.call('HGET', S.up, m) or ''
  end
  return own, 0, n
end

-- The path from the first message to `leaf` ('' = the empty path) as a set: on[m] is true for the
-- messages on it. Read through the active path, so it costs the length of `leaf`'s branch off the
-- active path, not of the conversation (0 for a leaf on the active path). Read it before the
-- script moves the head.
local function path_of(S, leaf)
  local on, depth = off_path(S, leaf)
  return setmetatable(on, {__index = function(_, m)
    if type(m) ~= 'string' or m == '' then return nil end
    local d = path_depth(S, m)
    if d and d <= depth then return true end
    return nil
  end})
end

-- Make `m` ('' = before the first message) the head, and the active path the path to it: a child
-- of the head extends it; another message replaces the part below the deepest message both paths
-- share (the head's branch off it out, `m`'s in).
local function move_head(S, m)
  local head = redis.call('HGET', S.hash, F.head) or ''
  local d = head_depth(S)
  if m ~= '' and m ~= head and redis.call('HGET', S.up, m) == head then
    redis.call('RPUSH', S.path, m)
    redis.call('HSET', S.hash, F.head, m, F.pd, d + 1)
    return
  end
  local ids, x, base = {}, m, 0
  while x ~= '' and #ids < 100000 do
    local at = path_depth(S, x)
    if at then
      base = at
      break
    end
    ids[#ids + 1] = x
    x = redis.call('HGET', S.up, x) or ''
  end
  if base == 0 then redis.call('DEL', S.path) else redis.call('LTRIM', S.path, 0, base - 1) end
  for i = #ids, 1, -1 do redis.call('RPUSH', S.path, ids[i]) end
  redis.call('HSET', S.hash, F.head, m, F.pd, base + #ids)
end

-- A summary's fields a folded one keeps (layout.ENDED_SUMMARY_WORDS: `session` is the tag, and `updated`
-- is kept as ms after `created`); a summary with any other field (an interrupt's lifecycle record)
-- is not folded.
local FOLDED = {status = true, created = true, updated = true, tenant = true, owner = true, origin = true,
  wf = true, session = true}

-- Fold an ended branch run's summary into the session's `ended` hash (keys.ended_summaries): a field
-- named by its id past the session's, instead of a key per run, expiring with the session. Kept as
-- its own key when it holds more than FOLDED, is not this session's, or a word of it has a space.
local function fold_summary(S, summary, run_id)
  local f, v = redis.call('HGETALL', summary), {}
  for i = 1, #f, 2 do
    if not FOLDED[f[i]] then return end
    v[f[i]] = f[i + 1]
  end
  local tag, suffix = string.match(run_id, '^(.-)%-%-(.+)$')
  if not suffix or v.session ~= tag or not v.wf or not tonumber(v.created) or not tonumber(v.updated) then return end
  local words = {v.status or '', v.created, tostring(tonumber(v.updated) - tonumber(v.created)),
    v.tenant or '', v.owner or '', v.origin or ''}
  for _, word in ipairs(words) do
    if string.find(word, ' ', 1, true) then return end
  end
  words[#words + 1] = v.wf
  redis.call('HSET', S.ended, suffix, table.concat(words, ' '))
  redis.call('DEL', summary)
  -- the session's TTL from its first fold (a script that returns before its touch leaves none)
  if redis.call('PTTL', S.ended) < 0 then redis.call('PEXPIRE', S.ended, redis.call('PTTL', S.hash)) end
end

-- What a session keeps of its branch run once a transition sees that it ended (and takes it out
-- of the live set): its summary only (status, workflow, whose, when: what get_run then reads, as
-- for a run past its records' TTL), folded into the session's `ended` hash (fold_summary). Its
-- hash, stream and snapshots go: the session's messages and events tell the turn (its messages
-- name the run). A run handed triggers is kept whole. `k`, `a`: its live or live_at block's keys
-- and arguments.
local function trim_ended(S, k, a)
  -- a run handed a cleared interrupt's trigger (`tg`, session_clear) keeps its records whole:
  -- its input or stream is the record that the trigger was delivered, once
  if redis.call('HEXISTS', k.run, F.tg) == 1 then return end
  redis.call('DEL', k.run, k.events, k.snapshots)
  fold_summary(S, k.summary, a.run_id)
end

-- The session's (`S`) live branch runs, as the caller read them (`keys`, `args`: live or live_at
-- blocks' keys and arguments, in the same order): run id -> {key, leaf, status, waiting, step, k,
-- a} (`k`, `a`: its block's). Runs that ended leave the live set here. nil when the caller's list
-- is not the live set (it read it before a concurrent change: it reads again and retries).
local function live_runs(S, keys, args)
  local live_key = S.live
  local listed = redis.call('HGETALL', live_key)
  if #listed ~= 2 * #args then return nil end
  local runs = {}
  for i = 1, #listed, 2 do runs[listed[i]] = {leaf = listed[i + 1]} end
  for j, a in ipairs(args) do
    local r = runs[a.run_id]
    if not r then return nil end
    local key = keys[j].run
    local cur = hmget(key, {F.status, F.waiting, F.step})
    r.key, r.status, r.waiting, r.step = key, cur.status, cur.waiting and full_request_id(cur.waiting, a.run_id), cur.step
    r.k, r.a = keys[j], a
  end
  for id, r in pairs(runs) do
    if not r.status or ENDED[r.status] then
      redis.call('HDEL', live_key, id)
      if r.status then trim_ended(S, r.k, r.a) end
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
    if r.status == V.waiting and r.waiting and string.sub(r.waiting, 1, 1) == 'i' and on[r.leaf]
        and redis.call('HEXISTS', dl_key, r.waiting) == 0 then
      by[#by + 1] = r.waiting
    end
  end
  return by
end
