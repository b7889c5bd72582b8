-- Answer (or cancel) an interrupt exactly once, as two functions over resume.lua's KEYS and ARGV
-- (as K and A), so that the session scripts that deliver an answer run the same transition inside
-- their own (session_answer, session_switch): resume_refused says why the answer cannot be taken
-- (a reply) or nil and the pending interrupt it read ({req, step}, with the run's fence, ttl, kept,
-- ~0, wf and until (as known) fields, and the status of the interrupt the caller read: in the same
-- HMGET), writing nothing; resume_commit then takes it (call it only after nil, with that pending: it reads neither again). The run
-- hash's `kept` names an interrupt whose answer its session keeps (session_answer, session_switch).
-- Answering: flip its status from pending, record the answer,
-- bump the fence, write the outbox, unindex, publish the event. The status field in the run hash
-- is the exactly-once point: of N concurrent calls, only the first finds it pending (scripts run
-- one at a time); an interrupt past the run's `expires` at `now` can no longer be answered.
-- An interrupt escalated since the caller read it (its expiry is not A.expires) gets 'moved': the
-- caller reads it again (its filter indexes changed) and retries.
-- K and A are resume.lua's KEYS and ARGV, bound by its header (a session script binds the call it
-- carries with bind_call(SPEC.resume, ...)).
local function resume_refused(K, A, delivering)
  local cur = hmget(K.run, {A.token_field, F.expires, F.step, F.kept, F.fence, F.ttl, F.folded_first, F.wf,
    A.read_status, F.until_ms, F.input, F.fmt})
  -- a run of a later version's format: the whole call is refused, nothing written (error() ends the script)
  local too_new = format_refused(cur.fmt, A.run_id)
  if too_new then error(too_new) end
  local req = cur[A.token_field] or (cur.step and legacy_token(K.run, A.token_field))
  if not req then
    if redis.call('EXISTS', K.run) == 0 and redis.call('EXISTS', K.summary) == 1 then return {'expired'} end
    return {'unknown'}
  end
  if A.request_id ~= '' and A.request_id ~= req then return {'mismatch', req} end
  -- an answer its session keeps for the run's abandoned branch (session_answer) is the answer: another
  -- one is refused; only the switch back delivers it (`delivering`). A cancellation still goes through.
  if not delivering and A.status == 'resolved' and cur.kept == req then
    return {'already_resolved', req}
  end
  local status = cur[A.read_status]
  if A.status_prefix .. req ~= A.read_status then status = redis.call('HGET', K.run, A.status_prefix .. req) end
  if status ~= 'pending' then
    if status == 'expired' then return {'expired', req} end
    return {'already_resolved', req}
  end
  if tonumber(A.now) >= (tonumber(cur.expires) or 0) then return {'expired', req} end
  if cur.expires ~= A.expires then return {'moved', req} end
  return nil, {req = req, step = cur.step, kept = cur.kept, fence = cur.fence, ttl = cur.ttl,
    folded = cur.folded_first, wf = cur.wf or '', known = cur.until_ms, input = cur.input}
end

-- A refusal that is one's own answer sent again (a retry after an unknown outcome: the reply of the
-- commit was lost) reads as the commit did: `accepted` (handed off: the commit's job, or the outbox,
-- runs it), when the interrupt was answered (not cancelled) with this very journal entry: its digest
-- (A.digest) is the run hash's `d:<req>` (layout.ANSWERED_PREFIX, written by resume_commit; the journal itself is
-- gone once the run ends). Another answer, or a cancellation, stays refused. Only on the refused
-- path: the commit reads nothing more.
local function answered_again(K, A, refused)
  local why, req = unpack(refused)
  if why ~= 'already_resolved' or A.status ~= 'resolved' or not req then return refused end
  local status, digest = A.status_prefix .. req, P.answered .. req
  local at = hmget(K.run, {status, digest, F.step, F.fence})
  if at[status] ~= 'resolved' or at[digest] ~= A.digest then return refused end
  return {'accepted', req, at.step or 0, at.fence or 0, 1}
end

-- The wait from the interrupt's creation, counted in the histogram's bucket (`buckets`: bounds in s),
-- by the run's workflow `wf` (the counters' fields: layout.COUNTERS); the histogram's count is the
-- accepted resumes' count.
local function count_wait(metrics, created, now, buckets, wf)
  local waited = math.max(0, tonumber(now) - tonumber(created))
  local bucket = '+Inf'
  for bound in string.gmatch(buckets, '%S+') do
    if waited <= tonumber(bound) * 1000 then bucket = bound break end
  end
  redis.call('HINCRBY', metrics, P.wait .. wf .. ':' .. bucket, 1)
  redis.call('HINCRBY', metrics, P.wait .. wf .. ':sum_ms', waited)
end

-- Stored format 3: a resume that begins the attempt itself, so that the worker runs the node
-- straight from its dequeue's reply (one round trip and one process hop fewer than its own
-- take-and-begin). The caller asks for it (A.begin_until: the lease's end by its clock) only
-- while every live process reads format 3 (formats.FormatGate), with no replica acknowledgement to
-- wait for, and never from a session's script; it happens only when the job's queue is empty (a
-- worker likely waits: a lease taken behind a backlog would lapse there) and the run's records fit
-- an element (BEGUN_MAX_BYTES; else it is queued plainly after all). It takes what begin.lua
-- takes (the lease, marked in `rb` so that its lapse counts no lost attempt: recover.lua; the run
-- running; the attempt counted; node.started) in place of the outbox entry and the job hash, and
-- pushes the element `<job id> <lease end> <the begin's reply>` (layout.py's "Formats"; read by
-- Transitions.begun_attempt). Its worker runs the node at once when it pops it within a tenth of the
-- lease of the resume, by its own clock (worker.begun_window_ms), else takes it over the old way
-- (begin.lua's `taking`); a stale element (fence moved on by a recovery) is refused there.
local LATIN1  -- byte -> its Latin-1 character in UTF-8, made at first use (a library's top level has no string.char)

local function latin1_text(s)
  if not LATIN1 then
    LATIN1 = {}
    for b = 128, 255 do LATIN1[string.char(b)] = string.char(192 + math.floor(b / 64), 128 + b % 64) end
  end
  return (string.gsub(s, '[\128-\255]', LATIN1))
end

local function begun_reply(fields, entries)
  local parts = {#fields, ' '}
  for _, v in ipairs(fields) do parts[#parts + 1] = #v .. ':' .. v end
  for _, v in ipairs(entries) do parts[#parts + 1] = #v .. ':' .. v end
  return table.concat(parts)
end

-- The begun attempt's element pushed (what hand_off_begun returns), or nil, having written nothing,
-- when the begin's reply would be over BEGUN_MAX_BYTES (a big input or journal: the element would
-- carry it whole).
local function begin_at_resume(K, A, step, fence)
  local entries = redis.call('HGETALL', K.journal)
  local at = hmget(K.run, {unpack(RUN_FIELDS)})
  local reply = begun_reply(attempt_fields(K.run, at), entries)
  if #reply > BEGUN_MAX_BYTES then return nil end
  redis.call('ZADD', K.leases, A.begin_until, A.run_id)
  redis.call('HINCRBY', K.metrics, F.attempts, 1)
  xadd(K.events, A.maxlen, 'node.started', started_blob(at.node, step, #entries > 0))
  return hand_off_begun(K.queues, A.job, 1, fence, A.begin_until .. ' ' .. latin1_text(reply))
end

local function resume_commit(K, A, pending)
  local req, step = pending.req, pending.step
  for _, index in ipairs(K.filters) do ix_rem(index, A.member_newest) end
  redis.call('HSET', K.journal, A.field, A.entry)
  local fence = tonumber(pending.fence) + 1
  local begins = A.begin_until ~= '' and hand_off_idle(K.queues, A.job, 1)
  local fields = {A.status_prefix .. req, A.status, F.status, begins and 'running' or 'queued', F.waiting, '',
    F.expires, '', F.updated, A.now, P.answered .. req, A.digest, F.fence, fence}
  if A.answered ~= '' then fields[#fields + 1], fields[#fields + 2] = F.ans, A.answered end
  if begins then
    fields[#fields + 1], fields[#fields + 2] = F.rb, fence
  else
    redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, step, fence))
  end
  ix_rem(K.newest, A.member_newest)
  ix_rem(K.expiring, A.member_expiring)
  local drop = {}
  if pending.kept then drop[#drop + 1] = F.kept end
  if not pending.folded then xadd(K.events, A.maxlen, A.event_type, A.event) end
  local left, renewed, known = keep_records(K.run, pending.ttl, {K.run, K.journal, K.state, K.events, K.snapshots},
    K.summary, A.retention, A.now, pending.known)
  if known then fields[#fields + 1], fields[#fields + 2] = F.until_ms, known end
  if not renewed then redis.call('PEXPIRE', K.journal, left) end  -- the answer may be its step's first entry
  if pending.folded then
    -- the events park folded go back to the stream (see unfold), before this one; a stream still there
    -- (its wake copy, within FOLD_WAKE_MS of the park: a quick answer) holds them, and only needs the
    -- records' life
    local there = not renewed and redis.call('PEXPIRE', K.events, left) == 1
    local moved = there and FOLDED or unfold_entries(K.run, K.events, pending.folded, pending.wf, pending.input)
    for _, f in ipairs(moved) do drop[#drop + 1] = f end
    xadd(K.events, A.maxlen, A.event_type, A.event)
    if not there then redis.call('PEXPIRE', K.events, left) end  -- a stream made again
  end
  redis.call('HSET', K.run, unpack(fields))
  if #drop > 0 then redis.call('HDEL', K.run, unpack(drop)) end
  count_wait(K.metrics, A.created, A.now, A.buckets, pending.wf)
  notice(K.notice, A.status == 'cancelled' and 'cancelled' or 'answered', A.run_id, full_request_id(req, A.run_id),
    pending.wf, A.expires)
  write_closing(K.summary, K.closing, A.closing)
  local begun = begins and begin_at_resume(K, A, step, fence)
  if begun then return {'accepted', req, step, fence, begun} end
  if begins then  -- too big to ride an element: queued as a resume that begins none
    redis.call('HSET', K.run, F.status, 'queued')
    redis.call('HDEL', K.run, F.rb)
    redis.call('ZADD', K.outbox, A.now, outbox_member(A.run_id, step, fence))
  end
  return {'accepted', req, step, fence, hand_off(K.queues, A.job, 1, step, fence)}
end
