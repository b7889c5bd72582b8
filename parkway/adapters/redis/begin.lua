-- Begin a node attempt: check the fence, take the lease, drop the outbox entry, mark the
-- run running, write node.started, and return what the attempt needs. A run already running at
-- this fence under a live lease belongs to another attempt (a duplicate or re-delivered job):
-- refused as stale, so one activation never runs twice at once. A lapsed lease may be taken over.
-- A job known by its id alone (the run and the fence: parkway's worker does not read the job's
-- hash) gives no step: the run's own is the one its fence stands for (a fence names one
-- activation), and its journal key and outbox member are made here: the journal key is the one
-- key this script names without its KEYS (it is the run key's, with `j:<step>` for `run`: the
-- same hash slot).
-- KEYS: 1 run, 2 journal of the step ('' = the step is not given), 3 workflow state, 4 leases,
--   5 outbox, 6 metrics, 7 events
-- ARGV: 1 step ('' = not given), 2 fence, 3 now, 4 lease until (ms), 5 run id, 6 outbox member
--   ('' when the step is not given), 7 maxlen

-- msgpack of a string (as msgpack-python writes it)
local function mp_str(s)
  local n = #s
  if n < 32 then return string.char(160 + n) .. s end
  if n < 256 then return '\217' .. string.char(n) .. s end
  if n < 65536 then return '\218' .. string.char(math.floor(n / 256), n % 256) .. s end
  return '\219' .. string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256, n % 256) .. s
end

local cur, err = check_fence(KEYS[1], ARGV[2], {'queued', 'running'})
if not cur then return err end
local step, journal, member = ARGV[1], KEYS[2], ARGV[6]
if step == '' then
  step = cur[3]
  journal = string.sub(KEYS[1], 1, -4) .. 'j:' .. step
  member = ARGV[5] .. ':' .. step .. ':' .. ARGV[2]
end
if cur[3] ~= step then return stale('run is at step ' .. cur[3] .. ', the job has ' .. step) end
if cur[2] == 'running' then
  local lease = redis.call('ZSCORE', KEYS[4], ARGV[5])
  if lease and tonumber(lease) > tonumber(ARGV[3]) then
    return stale('another attempt holds the lease of this activation')
  end
end
redis.call('HSET', KEYS[1], 'status', 'running', 'updated', ARGV[3])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[5])
redis.call('ZREM', KEYS[5], member)
redis.call('HINCRBY', KEYS[6], 'attempts', 1)
-- {node, step, replay}: a replay runs the node again over what its journal holds (an answer, a
-- cancellation, the steps of a lost attempt)
local replay = redis.call('HLEN', journal) > 0 and '\195' or '\194'
local node = redis.call('HGET', KEYS[1], 'node') or ''
xadd_run(KEYS[1], KEYS[7], ARGV[7], 'node.started',
  '\131\164node' .. mp_str(node) .. '\164step' .. mp_uint(step) .. '\166replay' .. replay)
if redis.call('PTTL', KEYS[7]) == -1 then redis.call('PEXPIRE', KEYS[7], records_left(KEYS[1])) end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', journal), redis.call('HGETALL', KEYS[3])}
