-- Clear a session-level interrupt exactly once, and deliver what it held: wake the held runs whose
-- paths nothing parks any more. When it parked the active path, its interrupt.resumed trigger is
-- delivered once that path is no longer parked, after the triggers of interrupts cleared before it
-- while the path was still parked (kept meanwhile in the session hash as `t:<seq>` = "<head>
-- <interrupt id>"), in clearing order: into the journal of the run at the head (`g:<seq>`, so its
-- policy and node code read them, and a replay reads the same) and on its stream; with no run live
-- at the head, a run is dispatched with them as its input. Clearing an interrupt of an abandoned
-- branch records the clearing, delivers nothing.
-- Returns {'resumed', run id}, {'dispatched', run id}, {'cleared'}, {'still_parked', ids...},
-- {'already_cleared'}, {'unknown'}, {'retry'}, {'gone'}.
-- KEYS
--   session: session  the session's keys
--   new: new_run   the run dispatched when none is live at the head (see create_run)
--   queues...      the jobs' queues (see hand_off)
--   live...: live_at  the session's live runs, as the caller read them
-- ARGV
--   #queues        how many queues
--   #live          how many live runs
--   #kept          how many kept triggers are due on the head's path
--   #job           how many job arguments (the new run's)
--   interrupt_id   the interrupt cleared
--   record         its cleared record blob
--   now            ms
--   maxlen         the streams' cap
--   cleared        interrupt.cleared blob
--   resumed        interrupt.resumed blob
--   head           the expected head
--   run_id         the new run's id
--   dispatched     run.dispatched blob
--   new: new_run   (see KEYS)
--   entry          this trigger's journal entry
--   session_id     the session's id
--   live...: live_at  (see KEYS)
--   kept...: kept  the kept triggers due on the head's path, in clearing order
--   job...         the new run's first job (see hand_off)
local S = K.session
local ttl = session_ttl(S)
if not ttl then return {'gone'} end
local iid = A.interrupt_id
local anchor = redis.call('HGET', S.open, iid)
if not anchor then
  if redis.call('HEXISTS', S.interrupts, iid) == 1 then return {'already_cleared'} end
  return {'unknown'}
end
local head = A.head
if redis.call('HGET', S.hash, F.head) ~= head then return {'retry'} end
local runs = live_runs(S, K.live, A.live)
if not runs then return {'retry'} end
for _, r in pairs(runs) do
  if r.step ~= r.a.step then return {'retry'} end
end
local on_active = path_of(S, head)
-- the kept triggers due on the active path must be the ones the caller prepared
local due, given = {}, {}
for _, t in ipairs(A.kept) do
  due[#due + 1] = t
  given[t.seq] = true
end
local fields = redis.call('HGETALL', S.hash)
for i = 1, #fields, 2 do
  local seq = string.match(fields[i], '^t:(%d+)$')
  if seq then
    local leaf = string.match(fields[i + 1], '^(%S*) ')
    if on_active[leaf] or leaf == head then
      if not given[seq] then return {'retry'} end
      given[seq] = nil
    end
  end
end
if next(given) then return {'retry'} end
local parked_active = anchor == '' or on_active[anchor] == true
redis.call('HDEL', S.open, iid)
redis.call('HSET', S.interrupts, iid, A.record)
sxadd(S, A.maxlen, 'interrupt.cleared', A.cleared)
touch(S, ttl, A.now)
local seq = parked_active and tostring(redis.call('HINCRBY', S.hash, F.tseq, 1)) or nil
due[#due + 1] = {seq = seq, entry = A.entry, event = A.resumed}
-- the triggers, in clearing order, into the journal and onto the stream of the run `r`
local function deliver(r)
  -- its stream records the delivery: kept when it ends (trim_ended); its journal is not empty now,
  -- if no attempt has begun yet (`fresh`, see create_run)
  redis.call('HSET', r.key, F.tg, 1)
  redis.call('HDEL', r.key, F.fresh)
  for _, t in ipairs(due) do
    redis.call('HSET', r.k.journal, P.trigger_entry .. t.seq, t.entry)
    xadd_run(r.key, r.k.events, A.maxlen, 'interrupt.resumed', t.event)
    redis.call('HDEL', S.hash, P.trigger .. t.seq)
  end
  redis.call('PEXPIRE', r.k.journal, redis.call('HGET', r.key, F.ttl))
end
-- what still parks the active path (held runs waking below do not change it)
local still = parked_active and parking(S.open, S.deliveries, runs, on_active) or {}
local woken_active
for id, r in pairs(runs) do
  if r.status == V.waiting and r.waiting == V.session
      and #parking(S.open, S.deliveries, runs, path_of(S, r.leaf)) == 0 then
    local fence = redis.call('HINCRBY', r.key, F.fence, 1)
    redis.call('HSET', r.key, F.status, 'queued', F.waiting, '', F.updated, A.now)
    redis.call('ZADD', K.new.outbox, A.now, outbox_member(id, r.step, fence))
    if parked_active and on_active[r.leaf] and #still == 0 then
      deliver(r)
      woken_active = id
    end
    hand_off(K.queues, r.a.job, 1, r.step, fence)
    r.status = 'queued'
  end
end
if not parked_active then return {'cleared'} end
if #still > 0 then
  -- held like any follow-on: the trigger waits until nothing parks the path
  redis.call('HSET', S.hash, P.trigger .. seq, head .. ' ' .. iid)
  return {'still_parked', unpack(still)}
end
if woken_active then return {'resumed', woken_active} end
if head == '' then return {'cleared'} end  -- no branch to deliver to: kept triggers stay kept
for id, r in pairs(runs) do
  if r.leaf == head then
    deliver(r)
    return {'resumed', id}
  end
end
-- a branch run is its session's owner's and tenant's (written on it: the session may expire)
local handed = create_run(K.new, A.new, K.queues, A.job, session_authority(S, A.session_id))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
set_leaf(K.new.run, head)
redis.call('HSET', K.new.run, F.tg, 1)  -- its input holds the triggers: kept when it ends (trim_ended)
for _, t in ipairs(due) do redis.call('HDEL', S.hash, P.trigger .. t.seq) end
redis.call('HSET', S.live, A.run_id, head)
sxadd(S, A.maxlen, 'run.dispatched', A.dispatched)
touch(S, ttl)
return {'dispatched', A.run_id}
