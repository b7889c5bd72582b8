-- Fork: create a new run that re-opens activation `step` of a run, at the node that step ran and
-- with the data it started with (the input for step 0, else the snapshot advance.lua wrote);
-- the old run is only read. The new run is created as any run is (create_run).
-- Returns {'forked', handed} or the refusal: {'unknown'}, {'expired'} (only the summary is left),
-- {'child'} (a child run), {'range', current step}, {'lost'} (the step's snapshot is gone), {'exists'}.
-- KEYS
--   old_run        the old run's hash
--   old_summary    its summary
--   old_snapshots  its snapshots
--   new: new_run   the new run
--   queues...      its first job's queues (see hand_off)
-- ARGV
--   step           the activation re-opened
--   new: new_run   the new run (its node '': this script reads the step's)
--   job...         its first job (see hand_off)
local cur = hmget(K.old_run, {F.step, F.node, F.parent})
if not cur.step then
  if redis.call('EXISTS', K.old_summary) == 1 then return {'expired'} end
  return {'unknown'}
end
if cur.parent then return {'child'} end
local step = tonumber(A.step)
if step > tonumber(cur.step) then return {'range', cur.step} end
-- the run's current step (running, waiting, or the last of a run that ended) ran the run's node
local node = redis.call('HGET', K.old_snapshots, step .. ':node')
if not node and step == tonumber(cur.step) then node = cur.node end
if not node or (step > 0 and redis.call('HEXISTS', K.old_snapshots, step) == 0) then return {'lost'} end
A.new.node = node
-- a fork is its run's: the same tenant, owner and origin
local handed = create_run(K.new, A.new, K.queues, A.job, authority_of(K.old_run))
if handed == nil then return {'exists'} end
return {'forked', handed}
