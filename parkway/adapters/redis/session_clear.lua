-- Clear a session-level interrupt exactly once, and deliver what it held: wake the held runs whose
-- paths nothing parks any more (a run on the active path gets the interrupt.resumed trigger on its
-- stream first); when it parked the active path and no run is live at the head, dispatch one for
-- the trigger. Clearing an interrupt of an abandoned branch records the clearing, delivers nothing.
-- KEYS: 1-8 the session's, 9 outbox, 10 new run, 11 its summary, 12 its events, 13-14 the job
--       queues (see hand_off), 15... two per live run: its run hash, its events
-- ARGV: 1 interrupt id, 2 cleared record blob, 3 now, 4 maxlen, 5 interrupt.cleared blob,
--       6 interrupt.resumed blob, 7 expected head, 8 live count, 9 job block length, 10 new run id,
--       11 run.dispatched blob, 12-21 the new run (see create_run), 22... the live run ids,
--       then the new run's job block, then one job block per live run (see hand_off)
local ttl = session_ttl()
if not ttl then return {'gone'} end
local anchor = redis.call('HGET', S.open, ARGV[1])
if not anchor then
  if redis.call('HEXISTS', S.i, ARGV[1]) == 1 then return {'already_cleared'} end
  return {'unknown'}
end
local head = ARGV[7]
if redis.call('HGET', S.s, 'head') ~= head then return {'retry'} end
local count, jl = tonumber(ARGV[8]), tonumber(ARGV[9])
local runs = live_runs(S.live, 15, 22, count, 2)
if not runs then return {'retry'} end
local on_active = path_of(S.up, head)
local parked_active = anchor == '' or on_active[anchor] == true
redis.call('HDEL', S.open, ARGV[1])
redis.call('HSET', S.i, ARGV[1], ARGV[2])
xadd(S.sev, ARGV[4], 'interrupt.cleared', ARGV[5])
touch(ttl, ARGV[3])
local jobs = 22 + count + jl
local woken_active
for id, r in pairs(runs) do
  if r.status == 'waiting' and r.waiting == 'session'
      and #parking(S.open, S.dl, runs, path_of(S.up, r.leaf)) == 0 then
    local fence = redis.call('HINCRBY', r.key, 'fence', 1)
    redis.call('HSET', r.key, 'status', 'queued', 'waiting', '', 'updated', ARGV[3])
    redis.call('ZADD', KEYS[9], ARGV[3], id .. ':' .. r.step .. ':' .. fence)
    if parked_active and on_active[r.leaf] then
      xadd_run(r.key, KEYS[15 + 2 * r.index + 1], ARGV[4], 'interrupt.resumed', ARGV[6])
      woken_active = id
    end
    local at = jobs + r.index * jl
    hand_off({KEYS[13], KEYS[14]}, ARGV, at, r.step, fence, at + jl - 1)
    r.status = 'queued'
  end
end
if not parked_active then return {'cleared'} end
local still = parking(S.open, S.dl, runs, on_active)
if #still > 0 then return {'still_parked', unpack(still)} end
if woken_active then return {'resumed', woken_active} end
if head == '' then return {'cleared'} end
for id, r in pairs(runs) do
  if r.leaf == head then
    xadd_run(r.key, KEYS[15 + 2 * r.index + 1], ARGV[4], 'interrupt.resumed', ARGV[6])
    return {'resumed', id}
  end
end
-- a branch run is its session's tenant's: its interrupts list under it
local handed = create_run({KEYS[10], KEYS[11], KEYS[12], KEYS[9], KEYS[13], KEYS[14]}, ARGV, 12, 22 + count,
  22 + count + jl - 1, redis.call('HGET', S.s, 'tenant'))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
redis.call('HSET', S.live, ARGV[10], head)
xadd(S.sev, ARGV[4], 'run.dispatched', ARGV[11])
touch(ttl)
return {'dispatched', ARGV[10]}
