-- Let an idle deployment return to its fixed keys: a workflow's closed-interrupt indexes lose the
-- members past the retention (the scripts that add to them prune them too, but only when they add);
-- a workflow with no interrupt left in any of its indexes leaves the set of workflows (its next
-- park adds it back, in the same step as its index member); once no workflow is left, neither is a
-- parked run, and the pause feed and the reconciler's mark in it go too (a waiting listing blocked
-- on the feed is served by the next park, which creates it again, with greater ids).
-- KEYS: 1 workflows, 2 the workflow's index newest, 3 its index expiring, 4 its closed index
--       resolved, 5 cancelled, 6 expired, 7 pause feed, 8 the reconciler's mark in it
-- ARGV: 1 workflow, 2 the oldest end time the closed indexes keep
local workflow, floor = ARGV[1], ARGV[2]
local held = redis.call('EXISTS', KEYS[2], KEYS[3])
for i = 4, 6 do
  redis.call('ZREMRANGEBYLEX', KEYS[i], '-', '(' .. floor)
  held = held + redis.call('EXISTS', KEYS[i])
end
if held > 0 then return 0 end
redis.call('SREM', KEYS[1], workflow)
if redis.call('SCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[7], KEYS[8]) end
return 1
