-- use_first with a child run as a contender: create the child run that races the interrupt, then
-- park the interrupt (park in _park.lua, with the park call this one carries), in one step.
-- The parent records which child races which interrupt (rc: the child's run id, rs: the
-- interrupt's status field): when the child ends while the interrupt is still pending, the
-- script that ends it (notify_parent) records the child's win and marks the interrupt cancelled,
-- so its token answers nothing. An answer or the timer winning leaves the interrupt non-pending,
-- and the child's end then leaves the parent alone (the parent's replay cancels the child).
-- KEYS
--   park: park     the park (see park.lua)
--   child: new_run  the child run
--   queues...      its first job's queues (see hand_off)
-- ARGV
--   park: park     the park
--   #queues        how many queues
--   #job           how many job arguments
--   child_id       the child run
--   check_field    the child check's journal field in the parent (c:<id>)
--   check_entry    its entry
--   started        child.started blob (for the parent's stream)
--   lineage        the child's ancestors (see spawn.lua)
--   field          the parent's journal field for the child's outcome (w:<id>)
--   child: new_run  the child run
--   job...         its first job (see hand_off)
local cur, err = check_fence(hmget(K.park.run, {F.fence, F.status, F.step}), A.park.fence, {'running'})
if not cur then return err end
if cur.step ~= A.park.step then return stale('run is at step ' .. cur.step) end
redis.call('HSET', K.park.journal, A.check_field, A.check_entry)
redis.call('HSET', K.park.run, F.rc, A.child_id, F.rs, A.park.status_field)
-- the child is its tree's (tenant, owner...), as use_workflow's is (spawn.lua)
if create_run(K.child, A.child, K.queues, A.job, authority_of(K.park.run)) ~= nil then  -- nil: it exists already
  redis.call('HSET', K.child.run, F.parent, A.park.run_id, F.pstep, A.park.step, F.pfield, A.field,
    F.lineage, A.lineage)
  xadd_run(K.park.run, K.park.events, A.park.maxlen, 'child.started', A.started)
end
return park(K.park, A.park)
