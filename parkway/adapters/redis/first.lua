-- use_first with a child run as a contender: park the interrupt and create the child run that
-- races it, in one step. This prelude runs first; park.lua's body follows it in the same script
-- (store.py composes them), over park.lua's KEYS and ARGV once the child's are taken off their ends.
-- The parent records which child races which interrupt (rc: the child's run id, rs: the
-- interrupt's status field): when the child ends while the interrupt is still pending, the
-- script that ends it (notify_parent) records the child's win and marks the interrupt cancelled,
-- so its token answers nothing. An answer or the timer winning leaves the interrupt non-pending,
-- and the child's end then leaves the parent alone (the parent's replay cancels the child).
-- KEYS: park.lua's, then the child's: run, summary, events, outbox, then h queues of its first
--       job (see hand_off)
-- ARGV: park.lua's, then the child's: 1 run id, 2 the child check's journal field (c:<id>), 3 its
--       entry, 4 child.started blob (for the parent's stream), 5 lineage (see spawn.lua), 6 journal
--       field in the parent (w:<id>), 7-16 create_run's (workflow ... outbox member), 17... its
--       first job; then the number of the child's ARGV, and h
local h = tonumber(table.remove(ARGV))
local n = tonumber(table.remove(ARGV))
local ck, ca = {}, {}
for i = 4 + h, 1, -1 do ck[i] = table.remove(KEYS) end
for i = n, 1, -1 do ca[i] = table.remove(ARGV) end
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
redis.call('HSET', KEYS[2], ca[2], ca[3])
redis.call('HSET', KEYS[1], 'rc', ca[1], 'rs', ARGV[5])
-- the child is its tree's (tenant, owner...), as use_workflow's is (spawn.lua)
if create_run(ck, ca, 7, 17, nil, authority_of(KEYS[1])) ~= nil then  -- nil: the child exists already, nothing starts twice
  redis.call('HSET', ck[1], 'parent', ARGV[14], 'pstep', ARGV[2], 'pfield', ca[6], 'lineage', ca[5])
  xadd_run(KEYS[1], KEYS[4], ARGV[12], 'child.started', ca[4])
end
-- park.lua follows
