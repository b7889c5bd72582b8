-- Shared by every script (prepended when loading, after the constants and schemas scripts.py
-- writes: FOLD_MAX, PART_BYTES, outbox_member, SPEC; each script's own K and A are bound by the
-- prologue scripts.py generates, after the shared files).

-- A call a script carries in its own values, bound by the binder scripts.py generated from its
-- schema's header (SPEC.<name>, for the schemas the script USES): K, A. Values left over or
-- missing are the caller's mistake: an error.
local function bind_call(spec, keys, args) return spec.call(keys, args) end
-- One schema's ARGV alone, read from `list` at `at` on (`part`: SPEC.<name>.argv): the table and
-- the position after it.
local function bind(part, list, at) return part(list, at) end

local function stale(msg) return redis.error_reply('STALE ' .. msg) end
-- no run under that id (its records expired, or the id was never a run's): a stale fence too
local function gone() return redis.error_reply('STALE GONE run is gone') end

-- Check that the run exists, is at `fence` and in one of `statuses`, from `cur`, the run's hash
-- as read by the caller (hmget: its fence, status and step, and any fields the caller needs, in
-- the same HMGET): `cur`, or nil and the refusal.
local function check_fence(cur, fence, statuses)
  if not cur.fence then return nil, gone() end
  if cur.fence ~= fence then return nil, stale('run is at fence ' .. cur.fence .. ', the job has ' .. fence) end
  for _, s in ipairs(statuses) do
    if cur.status == s then return cur end
  end
  return nil, stale('run is ' .. cur.status)
end

-- The field a token's hash had before token fields were base64url (layout.token_field): `t:` and
-- the same 128 bits as 32 hex digits. A run parked before then keeps its token there: the scripts
-- that find an interrupt by its token read that field when the new one is not there (legacy_token).
local B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
local function hex_token_field(field)
  local bits, n, out = 0, 0, {}
  for i = 3, #field do
    bits, n = bits * 64 + (string.find(B64URL, string.sub(field, i, i), 1, true) or 1) - 1, n + 6
    while n >= 4 do
      n = n - 4
      local p = 2 ^ n
      out[#out + 1] = string.format('%x', math.floor(bits / p))
      bits = bits % p
    end
  end
  return P.token .. string.sub(table.concat(out), 1, 32)
end
local function legacy_token(run, field)
  return redis.call('HGET', run, hex_token_field(field))
end

-- A request id whole from the run hash's name for it (layout.full_id): a minted id's head
-- (i<fence>_<nonce>) gets its run id back; any other name is the id itself.
local function full_request_id(short, run_id)
  local fence, nonce = string.match(short or '', '^i([0-9a-z]+)_([0-9a-z]+)$')
  if fence and #fence <= 13 and #nonce >= 5 and #nonce <= 8 then return short .. '_' .. run_id end
  return short
end

-- Bump the counters `counts` names: (field, increment) pairs the caller built (layout.COUNTERS); an
-- increment of 0 (a node's sub-millisecond duration added to its sum) changes nothing and is not sent.
local function count(metrics, counts)
  for i = 1, #counts, 2 do
    if tonumber(counts[i + 1]) ~= 0 then redis.call('HINCRBY', metrics, counts[i], counts[i + 1]) end
  end
end

local function expire_all(ttl, keys)
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ttl) end
end

-- The summary outlives the run's records by the retention (so an expired run reads expired, not
-- unknown): every script that renews the records renews it with them.
local function keep_summary(summary, records_ttl, retention)
  redis.call('PEXPIRE', summary, tonumber(records_ttl) + tonumber(retention))
end

-- Keep a run's records (`keys`, with the run's hash `run` among them, and its summary) at least
-- `need` ms: renewed to `need` plus a slack (1/RENEW_SLACK of it) only when the run's hash has less
-- than `need` left, or more than `need` plus the slack (a pause shorter than the run's TTL), so most
-- transitions renew nothing. Returns the ms the records have left: a key the caller may have just
-- created (an XADD or HSET of a key that was not there) takes that when nothing was renewed
-- (`renewed` false).
-- `now` and `known` (the run hash's `until`, read with the caller's first HMGET; nil when not read):
-- while `known` says the records have at least `need` plus CLOCK_TRUST_MS left (the callers' clocks,
-- and a caller's `now` and the moment its script runs, agree that closely: layout.CLOCK_TRUST_MS) and
-- no more than the slack past `need`, nothing is asked of Redis (no PTTL). The third value is the run
-- hash's new `until` for the caller's own HSET of the run (nil: keep it as it is); a caller without
-- `now` that renews has it dropped here (an `until` later than the records' TTL must never stay).
local function keep_records(run, need, keys, summary, retention, now, known)
  need, now, known = tonumber(need), tonumber(now), tonumber(known)
  local slack = math.floor(need / RENEW_SLACK)
  local keep = need + slack
  if now and known then
    local trusted = known - now
    if trusted >= need + CLOCK_TRUST_MS and trusted <= keep then return trusted, false, nil end
  end
  local left = redis.call('PTTL', run)
  if left >= need and left <= keep then return left, false, now and now + left end
  expire_all(keep, keys)
  keep_summary(summary, keep, retention)
  if not now then redis.call('HDEL', run, F.until_ms) end
  return keep, true, now and now + keep
end

-- The records' remaining life, for scripts that end a run without renewing them.
local function records_left(run_key)
  local left = redis.call('PTTL', run_key)
  if left < 0 then return 0 end
  return left
end

-- BLOCK ancestor: an ancestor of a child run whose interrupt shows on its stream too
-- KEYS
--   events         the ancestor's stream
--   run            its hash
--   journal        the journal of its step waiting
--   state          its workflow state
--   summary        its summary
--   fanout         its fan-out set (a fan-out's child must find itself there when it ends)

-- A child run's interrupt keeps its ancestors' records (`ancestors`: ancestor blocks) at least
-- `keep_ms` ms.
local function keep_ancestors(ancestors, keep_ms, retention)
  for _, a in ipairs(ancestors) do
    if redis.call('PTTL', a.run) < keep_ms then
      expire_all(keep_ms, {a.events, a.run, a.journal, a.state, a.fanout})
      keep_summary(a.summary, keep_ms, retention)
    end
  end
end

-- The field, part pairs of each `blob` (of the field, blob pairs in `given`) in parts of at most
-- PART_BYTES, `field:0`, `field:1`, ... (so the hash keeps Redis's compact encoding), for one HSET,
-- and each field's first part past its last (`field:<n>`).
local function parts_of(given)
  local out, past = {}, {}
  for j = 1, #given, 2 do
    local field, blob = given[j], given[j + 1]
    local n = math.max(1, math.ceil(#blob / PART_BYTES))
    for i = 0, n - 1 do
      out[#out + 1], out[#out + 2] = field .. ':' .. i, string.sub(blob, i * PART_BYTES + 1, (i + 1) * PART_BYTES)
    end
    past[#past + 1] = {field = field, n = n}
  end
  return out, past
end

-- Write each `blob` (of the field, blob pairs after `key`) in a hash in parts (parts_of), in one
-- HSET, and drop the parts a longer blob written there left.
local function hset_parts(key, ...)
  local out, after = parts_of({...})
  redis.call('HSET', key, unpack(out))
  local first = {}
  for i, f in ipairs(after) do first[i] = f.field .. ':' .. f.n end
  if redis.call('HDEL', key, unpack(first)) == 0 then return end  -- the usual case: nothing longer was there
  for _, f in ipairs(after) do
    local n = f.n + 1
    while redis.call('HDEL', key, f.field .. ':' .. n) == 1 do n = n + 1 end
  end
end

-- BLOCK closing: how an interrupt's lifecycle record ends, and its place among the closed ones
-- KEYS
--   index          the workflow's index of closed interrupts of its new status
-- ARGV
--   end_field      the lifecycle field of its end in the summary (e:<req>)
--   ended          its blob
--   member         the closed index member
--   created_field  the lifecycle record's first part's field (i:<req>)
--   created        its blob (written at the end: while open, the run's record says it; '' when
--                  the run's records are gone)

-- Write the end of an interrupt's lifecycle record in `summary` and list it as closed (`k`, `a`:
-- a closing block's keys and arguments). Listings read a closed index within the retention; the
-- members past it go in the reconciler's pass (prune.lua), not here. Its fields are written once,
-- here, when the interrupt ends (it ends once: its status field is flipped from pending in the same
-- step; its request id is its run's alone, see telemetry.mint_request_id): no longer parts can be
-- there to drop (hset_parts' HDEL).
local function write_closing(summary, k, a)
  local given = {a.end_field, a.ended}
  if a.created ~= '' then given = {a.end_field, a.ended, a.created_field, a.created} end
  redis.call('HSET', summary, unpack((parts_of(given))))
  redis.call('ZADD', k.index, 0, a.member)
end

-- BLOCK notice: where a transition tells the notification channels of an interrupt
-- KEYS
--   on             present while the deployment has channels (keys.notify_on)
--   stream         the notification stream (keys.notices)

-- Tell the channels (invariant 14: in the step that does it) that interrupt `request_id` of run
-- `run_id` of `workflow` was raised, escalated, expired, answered or cancelled (`kind`); `expires`,
-- its expiry, tells one escalation from the next (the event's id: layout.notice_id). A deployment
-- without channels pays one EXISTS.
local function notice(n, kind, run_id, request_id, workflow, expires)
  if redis.call('EXISTS', n.on) == 0 then return end
  redis.call('XADD', n.stream, 'MAXLEN', '~', NOTICES_MAXLEN, '*', 'k', kind, 'r', run_id, 'q', request_id,
    'w', workflow, 'x', expires)
end

local function xadd(stream, maxlen, kind, blob)
  return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 't', kind, 'd', blob)
end

-- A parked run's few events live in its hash, not in a stream of their own (a Redis stream costs
-- ~750 bytes however small): park copies them there, each in one field `~<i>` (from 0, in order)
-- holding `<entry id> <type length as one byte><type><data>` (a type FOLDED_TYPES names: a length of 0
-- and its index there, one byte), when they are at most FOLD_MAX and
-- each fits in PART_BYTES (the hash stays a listpack); else the stream stays whole. `~0` has its
-- entry id whole; each later one has its id relative to it: ms after `~0`'s, `-<seq>` only when
-- its sequence number is not 0 (`2`, `0-1`: about 13 bytes fewer each; relative_id).
-- The stream itself then lives FOLD_WAKE_MS more, not deleted at once: Redis serves the readers
-- blocked on it (XREAD BLOCK) the new interrupt event when the park script ends, and a deleted key
-- would leave them blocked. Readers read both, an entry once (store.read_events); whatever appends
-- to the run's stream unfolds first (xadd_run): the entries go back with their ids (those still in
-- the stream stay), so the stream reads as if it had never moved.
-- fold_fields(stream, out) appends those fields to `out` (for the caller's one HSET of the run's
-- hash) and says true, or false when the stream stays whole; a caller that folds gives the stream
-- FOLD_WAKE_MS. FOLDED (the field names `~0` to `~<FOLD_MAX - 1>`) and FOLDED_CODES (each
-- FOLDED_TYPES name's index there) are literals scripts.py writes with the constants: a library's
-- top level runs where Redis gives it no standard functions (FUNCTION LOAD), and a loop of
-- number-to-text conversions there cost every call ~3 us when each script ran whole.
-- msgpack of a string (as msgpack-python writes it)
local function mp_str(s)
  local n = #s
  if n < 32 then return string.char(160 + n) .. s end
  if n < 256 then return '\217' .. string.char(n) .. s end
  if n < 65536 then return '\218' .. string.char(math.floor(n / 256), n % 256) .. s end
  return '\219' .. string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256) .. s
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

-- the data of a run's usual run.started event ({workflow, input}, as create_run's caller writes it),
-- from its hash's wf and input (neither changes in the run's life)
local function started_data(wf, input)
  return '\130\168workflow' .. mp_str(wf) .. '\165input' .. input
end

-- Format 4 (layout.py's "Formats") folds a parked run's usual events shorter, each made again from
-- the run's hash when read (`h`: its cr, node, step and rq, which stay as they are while its events are
-- folded: every transition that changes them appends an event first, which unfolds them):
-- `~0`'s id in ms after the run's `cr` (an id under RELATIVE_MS is relative), and an event whose
-- data begins with what `folded_head` makes from the hash for its type keeps only the rest: `\0` and
-- its FOLDED_TYPES index plus 128, then the rest of its data (node.started: its replay flag;
-- interrupt: its expiry and audience after the short id `h`).
local function folded_head(kind, h)
  if kind == 'node.started' and h.node and h.step then
    return '\131\164node' .. mp_str(h.node) .. '\164step' .. mp_uint(h.step) .. '\166replay'
  end
  if kind == 'interrupt' and h.rq then return '\130\161h' .. mp_str(h.rq) end
  return nil
end

local function fold_fields(stream, out, wf, input, h)
  local entries = redis.call('XRANGE', stream, '-', '+', 'COUNT', FOLD_MAX + 1)
  if #entries == 0 or #entries > FOLD_MAX then return false end
  local fields = {}
  local base
  for i, e in ipairs(entries) do
    local id, f = unpack(e)  -- an entry: its id, its (field, value) pairs
    local t, kind, d, data = unpack(f)
    if #f ~= 4 or t ~= 't' or d ~= 'd' or #kind > 255 or #kind == 0 then return false end
    if i == 1 then
      base = tonumber(string.match(id, '^(%d+)'))
      local seq = string.match(id, '-(%d+)$')
      local cr = h and tonumber(h.cr)
      if cr and base >= cr and base - cr < RELATIVE_MS then
        id = string.format('%.0f', base - cr) .. (seq == '0' and '' or '-' .. seq)
      end
    else
      local ms, seq = string.match(id, '^(%d+)-(%d+)$')
      id = string.format('%.0f', tonumber(ms) - base) .. (seq == '0' and '' or '-' .. seq)
    end
    local code = FOLDED_CODES[kind]
    local v
    local head = h and code and folded_head(kind, h)
    if kind == 'run.started' and wf and input and data == started_data(wf, input) then
      v = id .. ' \0\0'  -- its data made again from the run's hash when read (started_data)
    elseif head and string.sub(data, 1, #head) == head then
      v = id .. ' \0' .. string.char(128 + code) .. string.sub(data, #head + 1)
    else
      v = id .. ' ' .. (code and '\0' .. string.char(code) or string.char(#kind) .. kind) .. data
    end
    if #v > PART_BYTES then return false end
    fields[#fields + 1] = FOLDED[i]
    fields[#fields + 1] = v
  end
  for _, v in ipairs(fields) do out[#out + 1] = v end
  return true
end

-- Put the events park folded into the run's hash back in its stream, with their ids (nothing when
-- none are folded). Those the stream still holds (within FOLD_WAKE_MS of the park) stay; an entry
-- someone appended to the stream behind parkway's back wins: folded entries not newer than it are
-- dropped (a stream's ids only grow).
-- Put one folded entry back in the stream with its id: false when the stream refuses it (it holds
-- that id or a later one). `base`: the ms of `~0`'s id, for a later entry (its id is relative to it);
-- `h`: the run's cr, node, step and rq (format 4's `~0` relative to cr, data made from the hash:
-- folded_head).
local function folded_ms(entry)
  return tonumber(string.match(entry, '^(%d+)'))
end
local function put_back(stream, entry, base, wf, input, h)
  local sp = string.find(entry, ' ', 1, true)
  local id = string.sub(entry, 1, sp - 1)
  local ms, seq = string.match(id, '^(%d+)-?(%d*)$')
  ms = tonumber(ms)
  if not base and ms < RELATIVE_MS then base = tonumber(h.cr) end  -- format 4's `~0`: after cr
  if base then  -- (an id folded whole, as before ids were relative, is at least `base`: kept)
    id = string.format('%.0f', ms >= base and ms or base + ms) .. '-' .. (seq == '' and '0' or seq)
  end
  local n, code = string.byte(entry, sp + 1, sp + 2)
  local kind, data
  if n == 0 and code == 0 then  -- the usual run.started, its data from the hash
    kind, data = 'run.started', started_data(wf or '', input or '')
  elseif n == 0 and code > 128 then  -- its data's head made from the hash (folded_head)
    kind = FOLDED_TYPES[code - 128]
    data = folded_head(kind, h) .. string.sub(entry, sp + 3)
  elseif n == 0 then  -- a type FOLDED_TYPES names
    kind, data = FOLDED_TYPES[string.byte(entry, sp + 2)], string.sub(entry, sp + 3)
  else
    kind, data = string.sub(entry, sp + 2, sp + 1 + n), string.sub(entry, sp + 2 + n)
  end
  local added = redis.pcall('XADD', stream, id, 't', kind, 'd', data)
  return type(added) ~= 'table' or not added.err
end
-- `folded`: the run's `~0` field if the caller read it (false: absent), else nil (read here); `wf`
-- and `input`: the run's, for a run.started folded without its data, read with it (else read here).
-- unfold_entries only puts the entries back and returns the fields they were in (empty: none), for
-- a caller that drops those fields and gives the stream the records' TTL itself (resume_commit).
-- The first entry goes back first: a stream that refuses it still holds them all (its wake copy,
-- within FOLD_WAKE_MS of the park: a quick answer), so the others are not read, and all the fields
-- are dropped.
local function unfold_entries(run, stream, folded, wf, input)
  if folded == nil then
    local got = hmget(run, {F.folded_first, F.wf, F.input})
    folded, wf, input = got.folded_first, got.wf, got.input
  end
  if not folded then return {} end  -- the usual case: nothing folded
  if not wf and string.find(folded, ' \0\0', 1, true) then  -- (its callers read them with ~0)
    local got = hmget(run, {F.wf, F.input})
    wf, input = got.wf, got.input
  end
  local h = hmget(run, {F.cr, F.node, F.step, F.rq})  -- (format 4: see folded_head)
  if not put_back(stream, folded, nil, wf, input, h) then return {unpack(FOLDED)} end
  local got = redis.call('HMGET', run, unpack(FOLDED, 2))
  local moved = {F.folded_first}
  local base = folded_ms(folded)
  if base < RELATIVE_MS then base = base + tonumber(h.cr) end
  for i, entry in ipairs(got) do  -- in order, up to the first field not there
    if not entry then break end
    put_back(stream, entry, base, wf, input, h)
    moved[i + 1] = FOLDED[i + 1]
  end
  return moved
end

local function unfold(run, stream, folded, wf, input)
  local moved = unfold_entries(run, stream, folded, wf, input)
  if #moved == 0 then return end
  redis.call('HDEL', run, unpack(moved))
  local left = redis.call('PTTL', run)
  if left > 0 then redis.call('PEXPIRE', stream, left) end
end

-- Append to a run's stream (`run`: its hash), unfolding its parked events first (see fold_fields;
-- `folded`: as unfold takes it).
local function xadd_run(run, stream, maxlen, kind, blob, folded, wf, input)
  unfold(run, stream, folded, wf, input)
  return xadd(stream, maxlen, kind, blob)
end

-- node.started's data ({node, step, replay}): a replay runs the node again over what its journal
-- holds (an answer, a cancellation, the steps of a lost attempt)
local function started_blob(node, step, replay)
  return '\131\164node' .. mp_str(node or '') .. '\164step' .. mp_uint(step) .. '\166replay' ..
    (replay and '\195' or '\194')
end

-- The run's part of a begin's reply: its fields as pairs (RUN_FIELDS, as `at` read them by the
-- scripts' names) and the status field `rs` names (a racing interrupt's): not its interrupts'
-- records or tokens; except, in format 4 (no `paused`: see park), the latest interrupt's record
-- (rq, rn and its parts), whose step and version say what `paused` said (layout.run_record).
local function attempt_fields(run, at)
  local fields = {}
  for _, name in ipairs(RUN_FIELDS) do
    local value = at[FIELD_NAME[name]]
    if value then fields[#fields + 1], fields[#fields + 2] = name, value end
    local racing = name == F.rs and value and value ~= '' and redis.call('HGET', run, value)
    if racing then fields[#fields + 1], fields[#fields + 2] = value, racing end
  end
  if at.paused or (tonumber(at.fmt) or 1) < 4 then return fields end
  local latest = hmget(run, {F.rq, F.rn})
  if not latest.rq then return fields end
  fields[#fields + 1], fields[#fields + 2] = F.rq, latest.rq
  fields[#fields + 1], fields[#fields + 2] = F.rn, latest.rn
  local names = {}
  for i = 0, tonumber(latest.rn) - 1 do names[#names + 1] = P.record .. i end
  local parts = redis.call('HMGET', run, unpack(names))
  for i, name in ipairs(names) do
    if parts[i] then fields[#fields + 1], fields[#fields + 2] = name, parts[i] end
  end
  return fields
end

-- Enqueue the job that carries the transition on, for the `step` and `fence` this script just
-- wrote: hand_off(keys, args, at, step, fence, last), where `keys` are the job's two keys and
-- `args` from `at` (to `last`, else to the end) its arguments ('' = enqueue nothing); returns 1 if
-- it enqueued. Its body is the job format's, not the store's: it is assigned after this file, from
-- the store's NextJob (parkway/workers/rq_internals/hand_off.lua, generated from RQ's job format).
-- Format 3 (a resume that begins its attempt: begin_at_resume in _resume.lua) adds two, assigned with
-- it: hand_off_idle(keys, args, at) says whether the job's queue is empty (and a job is asked for);
-- hand_off_begun(keys, args, at, fence, tail) pushes the queue element `<job id> <tail>` instead of
-- the job (no job hash: the element carries the begun attempt) and returns 2.
local hand_off, hand_off_idle, hand_off_begun

-- Queue a parent run at a new fence for a replay of its `step` (its outbox entry and its job: see
-- hand_off, on `queues` and `job`), renewing its records. `p`: its run, journal, state, events,
-- summary and the outbox by those names (a parent block, or a script's own K).
local function queue_parent(p, parent, step, now, retention, queues, job)
  local fence = redis.call('HINCRBY', p.run, F.fence, 1)
  local ttl = redis.call('HGET', p.run, F.ttl)
  redis.call('HSET', p.run, F.status, 'queued', F.waiting, '', F.expires, '', F.updated, now,
    F.until_ms, tonumber(now) + tonumber(ttl))
  redis.call('ZADD', p.outbox, now, outbox_member(parent, step, fence))
  expire_all(ttl, {p.run, p.journal, p.state, p.events})
  keep_summary(p.summary, ttl, retention)
  return hand_off(queues, job, 1, step, fence)
end

-- BLOCK below: a run below one that finish.lua ends (a child of its fan-out, the child it waits on,
-- the child racing its interrupt, or one below those), ended in the same step (see finish.lua)
-- KEYS
--   run            its hash
--   state          its workflow state
--   events         its stream
--   summary        its summary
--   fanout         its fan-out set
-- ARGV
--   run_id         the run
--   parent         the run it is below

-- BLOCK parent: where a child run's end goes (see notify_parent)
-- KEYS
--   run            the parent's hash
--   journal        its journal (of the step waiting)
--   state          its workflow state
--   events         its stream
--   summary        its summary
--   outbox         the outbox
--   fanout         its fan-out set
--   child_run      the child's hash
--   child_events   its stream
--   child_state    its workflow state
--   child_snapshots  its snapshots
--   child_journal  the journal of its last step
--   queues...      the parent's next job's queues (see hand_off)
-- ARGV
--   #queues        how many
--   #job           how many job arguments
--   run_id         the parent run
--   child_id       the child run
--   field          the parent's journal field for the child
--   entry          the journal entry blob
--   event_type     the parent's event (child.completed | child.ended)
--   event          its blob
--   now            ms
--   maxlen         the streams' cap
--   retention      ms a summary outlives its records
--   job...         the parent's next job (see hand_off)

-- A child run ended: record its outcome in its parent's journal and queue the parent, exactly
-- once (only a parent still waiting on this child, or on the interrupt it races, moves). Called by every script that ends a run
-- (advance, finish, recover, expire) as its last step, with its parent block (`p`: keys, `a`:
-- arguments); a root run has none (nil) and nothing happens.
-- A child of a fan-out (use_workflows: it is in the parent's fan-out set) records its outcome
-- whatever its parent is doing (a replay in flight sees it when it parks again: fanout.lua), and
-- queues the parent only when it waits on its children and either none is left running or some
-- are left to start; its own records then go (its summary stays: a finished fan-out child keeps
-- a few hundred bytes, its output being in the parent's journal).
local function notify_parent(p, a)
  if not p then return 0 end
  local cur = hmget(p.run, {F.status, F.waiting, F.step, F.rc, F.rs, F.expires, F.fl})
  if redis.call('SREM', p.fanout, a.child_id) == 1 then
    redis.call('DEL', p.child_run, p.child_events, p.child_state, p.child_snapshots, p.child_journal)
    if cur.status ~= 'queued' and cur.status ~= 'running' and cur.status ~= V.waiting then return 0 end
    redis.call('HSET', p.journal, a.field, a.entry)
    xadd_run(p.run, p.events, a.maxlen, a.event_type, a.event)
    if cur.status ~= V.waiting or cur.waiting ~= V.children then return 0 end
    if redis.call('SCARD', p.fanout) > 0 and tonumber(cur.fl or '0') == 0 then return 0 end
    return queue_parent(p, a.run_id, cur.step, a.now, a.retention, p.queues, a.job)
  end
  -- a child racing the interrupt the parent waits on (use_first, first.lua) wins while it is pending
  -- and before its deadline (the timer's: past it the timer came first, and the reconciler says so)
  local raced = cur.status == V.waiting and cur.rc == a.child_id and redis.call('HGET', p.run, cur.rs) == 'pending'
    and tonumber(a.now) < (tonumber(cur.expires) or 0)
  if not raced and (cur.status ~= V.waiting or cur.waiting ~= V.child .. a.child_id) then return 0 end
  if raced then redis.call('HSET', p.run, cur.rs, 'cancelled') end  -- its token now answers nothing
  redis.call('HSET', p.journal, a.field, a.entry)
  xadd_run(p.run, p.events, a.maxlen, a.event_type, a.event)
  return queue_parent(p, a.run_id, cur.step, a.now, a.retention, p.queues, a.job)
end

-- Whose a run is: written on the run and its summary when it is created and never changed after, so
-- every access checks these and nothing derives them later (from an id a caller chose, or a
-- session that may have expired). Each absent for none: tenant, owner (a user's runs and a
-- session's branch runs), origin (the rank of the caller that started it: system, machine,
-- frontend), session (a branch run's). A child run and a fork copy their run's.
local AUTHORITY = {F.tenant, F.owner, F.origin, F.session}

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

-- Stored format 4: an index (a workflow's newest or expiring, a filter index, the run index) kept in
-- buckets of at most BUCKET_MAX members, so that each is a listpack (~45-50 bytes a member where one
-- big zset's skiplist costs ~140). All its members sit at score 0 and are read lexicographically, as
-- the single zset's. Keys, derived from the index's key `ix` the caller declared (keys.bucket_directory,
-- bucket, bucket_count; the same shard: a script runs on one): the directory `ix/d`, a zset at score 0
-- with one member per bucket, its lower bound (a member, at least 7 bytes), a NUL byte and its id; the
-- bucket `ix/d:<id>`, holding the members from its bound up to the next bucket's; `ix/n`, a hash with
-- `n` (the members in buckets: a count without a walk) and `i` (the last id given).
-- A member m belongs to the bucket with the greatest bound <= m: its directory member is the greatest
-- one below m .. '\1' (a bound b <= m sorts below it, b's NUL before any byte of m's run id; a bound
-- above m sorts above it). No comparison of strings in Lua (Lua's `<` is the locale's strcoll): Redis
-- orders, Lua only tests equality.
-- A writer of the old form (formats before 4) ZADDs the index itself; a reader reads both (page.lua),
-- and every remover removes from both (ix_rem): old members drain under their runs' TTL.
local function ix_id(entry) return string.match(entry, '%z(%d+)$') end
local function ix_bucket(dir, entry) return dir .. BUCKET_SEPARATOR .. ix_id(entry) end
local function ix_entry(dir, m)
  return redis.call('ZREVRANGEBYLEX', dir, '(' .. m .. '\1', '-', 'LIMIT', 0, 1)[1]
end

-- A new bucket holding `members` (sorted, `lowest` the first), entered in the directory at it.
local function ix_new_bucket(dir, count, lowest, members)
  local id = redis.call('HINCRBY', count, 'i', 1)
  local pairs_ = {}
  for _, m in ipairs(members) do pairs_[#pairs_ + 1], pairs_[#pairs_ + 2] = 0, m end
  redis.call('ZADD', dir .. BUCKET_SEPARATOR .. id, unpack(pairs_))
  redis.call('ZADD', dir, 0, lowest .. '\0' .. id)
end

-- Split the full bucket of directory member `entry` before `m` joins it: when m comes after every
-- member of the last bucket (the usual insert, in time order) m starts a bucket of its own (nil:
-- added), so buckets fill to BUCKET_MAX; else the upper half moves to a new bucket, and the bucket m
-- belongs to now is returned.
local function ix_split(dir, count, entry, bucket, m)
  local last = not redis.call('ZRANGEBYLEX', dir, '(' .. entry, '+', 'LIMIT', 0, 1)[1]
  if last and not redis.call('ZRANGEBYLEX', bucket, '[' .. m, '+', 'LIMIT', 0, 1)[1] then
    ix_new_bucket(dir, count, m, {m})
    return nil
  end
  local upper = redis.call('ZRANGE', bucket, BUCKET_MAX / 2, -1)
  local lowest = unpack(upper)
  ix_new_bucket(dir, count, lowest, upper)
  redis.call('ZREM', bucket, unpack(upper))
  return ix_bucket(dir, ix_entry(dir, m))
end

-- Add `m` to index `ix`'s buckets: 1 when it was not there.
local function bucket_add(ix, m)
  local dir, count = ix .. BUCKET_DIRECTORY, ix .. BUCKET_COUNT
  local entry = ix_entry(dir, m)
  if not entry then
    entry = redis.call('ZRANGE', dir, 0, 0)[1]
    if not entry then
      ix_new_bucket(dir, count, m, {m})
      redis.call('HINCRBY', count, 'n', 1)
      return 1
    end
    -- below every bound: the first bucket's comes down to m
    redis.call('ZREM', dir, entry)
    entry = m .. '\0' .. ix_id(entry)
    redis.call('ZADD', dir, 0, entry)
  end
  local bucket = ix_bucket(dir, entry)
  -- split before adding: a zset past the listpack's entries becomes a skiplist and stays one
  if redis.call('ZCARD', bucket) >= BUCKET_MAX and not redis.call('ZSCORE', bucket, m) then
    bucket = ix_split(dir, count, entry, bucket, m)
    if not bucket then
      redis.call('HINCRBY', count, 'n', 1)
      return 1
    end
  end
  local added = redis.call('ZADD', bucket, 0, m)
  if added == 1 then redis.call('HINCRBY', count, 'n', 1) end
  return added
end

-- Remove `m` from index `ix`'s buckets: 1 when it was there. An emptied bucket leaves the directory
-- (Redis drops the empty zset); the last one takes the companion hash with it.
local function bucket_rem(ix, m)
  local dir = ix .. BUCKET_DIRECTORY
  local entry = ix_entry(dir, m)
  if not entry then return 0 end
  local bucket = ix_bucket(dir, entry)
  if redis.call('ZREM', bucket, m) == 0 then return 0 end
  if redis.call('EXISTS', bucket) == 0 then
    redis.call('ZREM', dir, entry)
    if redis.call('EXISTS', dir) == 0 then
      redis.call('DEL', ix .. BUCKET_COUNT)
      return 1
    end
  end
  redis.call('HINCRBY', ix .. BUCKET_COUNT, 'n', -1)
  return 1
end

-- Index `m` in `ix`: in its buckets when `bucketed` (the writers' format is 4), else in the single zset.
local function ix_add(ix, m, bucketed)
  if bucketed then return bucket_add(ix, m) end
  return redis.call('ZADD', ix, 0, m)
end

-- Take `m` out of `ix`, whichever form holds it (a run parked before the writers moved to format 4
-- is in the single zset).
local function ix_rem(ix, m)
  return redis.call('ZREM', ix, m) + bucket_rem(ix, m)
end

-- Whether a format-4 writer's argument says to write buckets ('1'; '' or '0': the single zset).
local function bucketed_arg(value) return value == '1' end

-- Add the run created now to the store-wide run index (`runs`, a lex index: its creation time as 6
-- bytes big-endian, then its id, as codec.run_member builds it). The reconciler walks the members
-- older than the retention and drops those whose summary is gone (prune_runs). A run created in format 4
-- goes in its buckets (ix_add).
local function list_run(runs, run_id, now, format)
  local t, out = tonumber(now), {}
  for i = 6, 1, -1 do
    out[i] = string.char(t % 256)
    t = math.floor(t / 256)
  end
  local member = table.concat(out) .. run_id
  ix_add(runs, member, tonumber(format) >= BUCKETS_FORMAT)
end

-- BLOCK new_run: a run to create (see create_run)
-- KEYS
--   run            its hash
--   summary        its summary
--   events         its stream
--   outbox         the outbox
--   runs           the run index (see list_run)
-- ARGV
--   run_id         its id
--   workflow       its workflow
--   ref            the workflow's reference (code version)
--   node           its start node
--   input          its input blob
--   ttl            ms its records live
--   now            ms
--   retention      ms its summary outlives them
--   maxlen         its stream's cap
--   started        its run.started blob
--   member         its first job's outbox member
--   trace          the trace context its spans descend from ('' = not traced: see layout.TRACE)
--   format         the stored format to write it in (see born_fields)

-- The run hash's fields that say its stored format and its creation time `now`, for a run created in
-- `format` (layout.py's "Formats"): format 1 names none (`created`); formats 2 on say `fmt` and name the
-- creation time `cr`.
local function born_fields(format, now)
  if tonumber(format) >= 2 then return {F.fmt, tonumber(format), F.cr, now} end
  return {F.created, now}
end

-- An error reply (the caller returns it, having written nothing) when the run hash's format (`fmt`,
-- absent: 1) is newer than this code reads (FORMAT_READS, generated from layout.READS_FORMATS); nil
-- when it reads it. Python raises FormatTooNew from it (errors.py).
local function format_refused(fmt, run_id)
  local found = tonumber(fmt or '') or 1
  if found > FORMAT_READS then
    return redis.error_reply('FORMAT run ' .. run_id .. ' ' .. found .. ' ' .. FORMAT_READS)
  end
  return nil
end

-- Create a queued run with its summary, its run.started event and outbox entry, and queue its
-- first job (node.started is the job's, written when a worker begins the node: begin.lua); nil
-- when the run id is taken. `k`, `a`: a new_run block's keys and arguments; `queues`, `job`: its
-- first job (see hand_off). `auth` (authority_of, authority_arg): whose the run is, kept in its
-- summary too, so a caller bound to another tenant or owner is refused the run after its records
-- expire as well.
local function create_run(k, a, queues, job, auth)
  if redis.call('EXISTS', k.run, k.summary) > 0 then return nil end
  local keep = tonumber(a.ttl) + math.floor(tonumber(a.ttl) / RENEW_SLACK)  -- see keep_records
  redis.call('HSET', k.run, F.wf, a.workflow, F.ref, a.ref, F.status, 'queued', F.node, a.node,
    F.step, 0, F.fence, 0, F.input, a.input, F.updated, a.now, F.ttl, a.ttl,
    F.until_ms, tonumber(a.now) + keep, F.fresh, 1, unpack(auth))
  redis.call('HSET', k.run, unpack(born_fields(a.format, a.now)))
  if a.trace ~= '' then redis.call('HSET', k.run, F.tc, a.trace) end
  redis.call('HSET', k.summary, F.wf, a.workflow, F.status, 'queued', F.created, a.now, F.updated, a.now,
    unpack(auth))
  keep_summary(k.summary, keep, a.retention)
  list_run(k.runs, a.run_id, a.now, a.format)
  xadd(k.events, a.maxlen, 'run.started', a.started)
  redis.call('ZADD', k.outbox, a.now, a.member)
  expire_all(keep, {k.run, k.events})
  return hand_off(queues, job, 1, 0, 0)
end

-- BLOCK child: a child run a node starts (use_workflow: spawn.lua; use_workflows: fanout.lua)
-- KEYS
--   run            its hash
--   summary        its summary
--   events         its stream
-- ARGV
--   #job           how many job arguments
--   run_id         the child run
--   workflow       its workflow
--   ref            the workflow's reference
--   node           its start node
--   input          its input blob
--   ttl            ms its records live
--   started        its run.started blob
--   field          the parent's journal field for its outcome (w:<id>)
--   lineage        its ancestors as run:step, parent first, space-separated
--   check_field    the child check's journal field in the parent (c:<id>)
--   check_entry    its entry
--   parent_event   child.started blob (for the parent's stream)
--   trace          the trace context its spans descend from (the parent's attempt's; '' = not traced)
--   format         the stored format to write it in (see born_fields)
--   job...         its first job (see hand_off; its node.started is its job's, as for any run)

-- Create the child run `c` (keys), `a` (arguments) of the parent `parent` at `step`: queued, its
-- outcome going to the parent's journal (notify_parent), with its summary, run.started, outbox
-- entry and first job (on `queues`). `auth`: whose it is (field, value pairs); `index`: the run
-- index (`runs`: see list_run).
local function start_child(c, a, parent, step, now, maxlen, retention, auth, outbox, queues, index)
  redis.call('HSET', c.run, F.wf, a.workflow, F.ref, a.ref, F.status, 'queued', F.node, a.node,
    F.step, 0, F.fence, 0, F.input, a.input, F.updated, now, F.ttl, a.ttl,
    F.until_ms, tonumber(now) + tonumber(a.ttl), F.fresh, 1, F.parent, parent, F.pstep, step, F.pfield, a.field,
    F.lineage, a.lineage, unpack(auth))
  redis.call('HSET', c.run, unpack(born_fields(a.format, now)))
  if a.trace ~= '' then redis.call('HSET', c.run, F.tc, a.trace) end
  redis.call('HSET', c.summary, F.wf, a.workflow, F.status, 'queued', F.created, now, F.updated, now, unpack(auth))
  keep_summary(c.summary, a.ttl, retention)
  list_run(index.runs, a.run_id, now, a.format)
  xadd(c.events, maxlen, 'run.started', a.started)
  redis.call('ZADD', outbox, now, outbox_member(a.run_id, 0, 0))
  expire_all(a.ttl, {c.run, c.events})
  return hand_off(queues, a.job, 1, 0, 0)
end
