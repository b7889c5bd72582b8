-- Fork: create a new run that re-opens activation `step` of a run, at the node that step ran and
-- with the data it started with (the input for step 0, else the snapshot advance.lua wrote);
-- the old run is only read. The new run is created as any run is (create_run).
-- KEYS: 1 old run, 2 old summary, 3 old snapshots, 4 new run, 5 new summary, 6 new events,
--       7 outbox, 8-9 the new run's first job's queues (see hand_off)
-- ARGV: 1 step, 2 new run's workflow, 3 ref, 4 '' (filled here: the step's node), 5 data blob,
--       6 ttl ms, 7 now, 8 retention ms, 9 maxlen, 10 run.started blob, 11 outbox member,
--       12... the new run's first job (see hand_off)
-- Returns {'forked', handed} or the refusal: {'unknown'}, {'expired'} (only the summary is left),
-- {'child'} (a child run), {'range', current step}, {'lost'} (the step's snapshot is gone), {'exists'}.
local cur = redis.call('HMGET', KEYS[1], 'step', 'node', 'parent')
if not cur[1] then
  if redis.call('EXISTS', KEYS[2]) == 1 then return {'expired'} end
  return {'unknown'}
end
if cur[3] then return {'child'} end
local step = tonumber(ARGV[1])
if step > tonumber(cur[1]) then return {'range', cur[1]} end
local node = redis.call('HGET', KEYS[3], step .. ':node')
if not node and step == tonumber(cur[1]) then node = cur[2] end
if not node or (step > 0 and redis.call('HEXISTS', KEYS[3], step) == 0) then return {'lost'} end
local args = {}
for i = 1, #ARGV do args[i] = ARGV[i] end
args[4] = node
-- a fork is its run's: the same tenant, owner and origin
local handed = create_run({KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]}, args, 2, 12, nil,
  authority_of(KEYS[1]))
if handed == nil then return {'exists'} end
return {'forked', handed}
