-- Clear a session-level interrupt exactly once, and deliver what it held: wake the held runs whose
-- paths nothing parks any more (a run on the active path gets the interrupt.resumed trigger on its
-- stream first); when it parked the active path and no run is live at the head, dispatch one for
-- the trigger. Clearing an interrupt of an abandoned branch records the clearing, delivers nothing.
-- KEYS: 1 session, 2 up, 3 open, 4 interrupts, 5 deliveries, 6 live, 7 session events, 8 outbox,
--       9 new run, 10 its summary, 11 its events, 12-13 the job queues (see hand_off),
--       14... two per live run: its run hash, its events
-- ARGV: 1 interrupt id, 2 cleared record blob, 3 now, 4 maxlen, 5 interrupt.cleared blob,
--       6 interrupt.resumed blob, 7 expected head, 8 live count, 9 job block length, 10 new run id,
--       11 run.dispatched blob, 12-22 the new run (see create_run), 23... the live run ids,
--       then the new run's job block, then one job block per live run (see hand_off)
local ttl = redis.call('HGET', KEYS[1], 'ttl')
if not ttl then return {'gone'} end
local anchor = redis.call('HGET', KEYS[3], ARGV[1])
if not anchor then
  if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return {'already_cleared'} end
  return {'unknown'}
end
local head = ARGV[7]
if redis.call('HGET', KEYS[1], 'head') ~= head then return {'retry'} end
local count, jl = tonumber(ARGV[8]), tonumber(ARGV[9])
local runs = live_runs(KEYS[6], 14, 23, count, 2)
if not runs then return {'retry'} end
local on_active = path_of(KEYS[2], head)
local parked_active = anchor == '' or on_active[anchor] == true
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[1], 'updated', ARGV[3])
xadd(KEYS[7], ARGV[4], 'interrupt.cleared', ARGV[5])
expire_all(ttl, {KEYS[1], KEYS[3], KEYS[4], KEYS[7]})
local jobs = 23 + count + jl
local woken_active
for id, r in pairs(runs) do
  if r.status == 'waiting' and r.waiting == 'session'
      and #parking(KEYS[3], KEYS[5], runs, path_of(KEYS[2], r.leaf)) == 0 then
    local fence = redis.call('HINCRBY', r.key, 'fence', 1)
    redis.call('HSET', r.key, 'status', 'queued', 'waiting', '', 'updated', ARGV[3])
    redis.call('ZADD', KEYS[8], ARGV[3], id .. ':' .. r.step .. ':' .. fence)
    if parked_active and on_active[r.leaf] then
      xadd(KEYS[14 + 2 * r.index + 1], ARGV[4], 'interrupt.resumed', ARGV[6])
      woken_active = id
    end
    local at = jobs + r.index * jl
    hand_off({KEYS[12], KEYS[13]}, ARGV, at, r.step, fence, at + jl - 1)
    r.status = 'queued'
  end
end
if not parked_active then return {'cleared'} end
local still = parking(KEYS[3], KEYS[5], runs, on_active)
if #still > 0 then return {'still_parked', unpack(still)} end
if woken_active then return {'resumed', woken_active} end
if head == '' then return {'cleared'} end
for id, r in pairs(runs) do
  if r.leaf == head then
    xadd(KEYS[14 + 2 * r.index + 1], ARGV[4], 'interrupt.resumed', ARGV[6])
    return {'resumed', id}
  end
end
local handed = create_run({KEYS[9], KEYS[10], KEYS[11], KEYS[8], KEYS[12], KEYS[13]}, ARGV, 12, 23 + count, 23 + count + jl - 1)
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
redis.call('HSET', KEYS[6], ARGV[10], head)
xadd(KEYS[7], ARGV[4], 'run.dispatched', ARGV[11])
expire_all(ttl, {KEYS[6]})
return {'dispatched', ARGV[10]}
