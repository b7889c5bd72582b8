-- Clear a session-level interrupt exactly once, and deliver what it held: wake the held runs whose
-- paths nothing parks any more. When it parked the active path, its interrupt.resumed trigger is
-- delivered once that path is no longer parked, after the triggers of interrupts cleared before it
-- while the path was still parked (kept meanwhile in the session hash as `t:<seq>` = "<head>
-- <interrupt id>"), in clearing order: into the journal of the run at the head (`g:<seq>`, so its
-- policy and node code read them, and a replay reads the same) and on its stream; with no run live
-- at the head, a run is dispatched with them as its input. Clearing an interrupt of an abandoned
-- branch records the clearing, delivers nothing.
-- KEYS: 1-8 the session's, 9 outbox, 10 new run, 11 its summary, 12 its events, 13-14 the job
--       queues (see hand_off), 15... three per live run: its run hash, its events, its journal
--       at the step read
-- ARGV: 1 interrupt id, 2 cleared record blob, 3 now, 4 maxlen, 5 interrupt.cleared blob,
--       6 interrupt.resumed blob, 7 expected head, 8 live count, 9 job block length, 10 new run id,
--       11 run.dispatched blob, 12-21 the new run (see create_run), 22 this trigger's journal entry,
--       23 number of kept triggers due on the head's path, 24 session id, 25... the live run ids, then their steps
--       as read, then per kept trigger: its seq, journal entry, interrupt.resumed blob; then the new
--       run's job block, then one job block per live run (see hand_off)
local ttl = session_ttl()
if not ttl then return {'gone'} end
local iid = ARGV[1]
local anchor = redis.call('HGET', S.open, iid)
if not anchor then
  if redis.call('HEXISTS', S.i, iid) == 1 then return {'already_cleared'} end
  return {'unknown'}
end
local head = ARGV[7]
if redis.call('HGET', S.s, 'head') ~= head then return {'retry'} end
local count, jl, nkept = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[23])
local ids_at, steps_at, kept_at = 25, 25 + count, 25 + 2 * count
local jobs = kept_at + 3 * nkept + jl  -- the first live run's job block
local runs = live_runs(S.live, 15, ids_at, count, 3)
if not runs then return {'retry'} end
for _, r in pairs(runs) do
  if r.step ~= ARGV[steps_at + r.index] then return {'retry'} end
end
local on_active = path_of(S.up, head)
-- the kept triggers due on the active path must be the ones the caller prepared
local due, given = {}, {}
for j = 0, nkept - 1 do
  local at = kept_at + 3 * j
  due[#due + 1] = {seq = ARGV[at], entry = ARGV[at + 1], event = ARGV[at + 2]}
  given[ARGV[at]] = true
end
local fields = redis.call('HGETALL', S.s)
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
redis.call('HSET', S.i, iid, ARGV[2])
xadd(S.sev, ARGV[4], 'interrupt.cleared', ARGV[5])
touch(ttl, ARGV[3])
local seq = parked_active and tostring(redis.call('HINCRBY', S.s, 'tseq', 1)) or nil
due[#due + 1] = {seq = seq, entry = ARGV[22], event = ARGV[6]}
-- the triggers, in clearing order, into the journal and onto the stream of the run `r`
local function deliver(r)
  for _, t in ipairs(due) do
    redis.call('HSET', KEYS[15 + 3 * r.index + 2], 'g:' .. t.seq, t.entry)
    xadd_run(r.key, KEYS[15 + 3 * r.index + 1], ARGV[4], 'interrupt.resumed', t.event)
    redis.call('HDEL', S.s, 't:' .. t.seq)
  end
  redis.call('PEXPIRE', KEYS[15 + 3 * r.index + 2], redis.call('HGET', r.key, 'ttl'))
end
-- what still parks the active path (held runs waking below do not change it)
local still = parked_active and parking(S.open, S.dl, runs, on_active) or {}
local woken_active
for id, r in pairs(runs) do
  if r.status == 'waiting' and r.waiting == 'session'
      and #parking(S.open, S.dl, runs, path_of(S.up, r.leaf)) == 0 then
    local fence = redis.call('HINCRBY', r.key, 'fence', 1)
    redis.call('HSET', r.key, 'status', 'queued', 'waiting', '', 'updated', ARGV[3])
    redis.call('ZADD', KEYS[9], ARGV[3], id .. ':' .. r.step .. ':' .. fence)
    if parked_active and on_active[r.leaf] and #still == 0 then
      deliver(r)
      woken_active = id
    end
    local at = jobs + r.index * jl
    hand_off({KEYS[13], KEYS[14]}, ARGV, at, r.step, fence, at + jl - 1)
    r.status = 'queued'
  end
end
if not parked_active then return {'cleared'} end
if #still > 0 then
  -- held like any follow-on: the trigger waits until nothing parks the path
  redis.call('HSET', S.s, 't:' .. seq, head .. ' ' .. iid)
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
local new_keys = {run = KEYS[10], summary = KEYS[11], events = KEYS[12], outbox = KEYS[9]}
local job_at = kept_at + 3 * nkept
local handed = create_run(new_keys, bind(SPEC.new_run.argv, ARGV, 12), {KEYS[13], KEYS[14]},
  {unpack(ARGV, job_at, job_at + jl - 1)}, session_authority(ARGV[24]))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
set_leaf(KEYS[10], head)
for _, t in ipairs(due) do redis.call('HDEL', S.s, 't:' .. t.seq) end
redis.call('HSET', S.live, ARGV[10], head)
xadd(S.sev, ARGV[4], 'run.dispatched', ARGV[11])
touch(ttl)
return {'dispatched', ARGV[10]}
