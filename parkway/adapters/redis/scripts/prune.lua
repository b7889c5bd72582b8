-- Let an idle deployment return to its fixed keys: a workflow's closed-interrupt indexes lose the
-- members past the retention (listings leave them out; the scripts that add to them do not prune);
-- a workflow with no interrupt left in any of its indexes leaves the set of workflows (its next
-- park adds it back, in the same step as its index member); once no workflow is left, neither is a
-- parked run, and the pause feed and the reconciler's mark in it go too (a waiting listing blocked
-- on the feed is served by the next park, which creates it again, with greater ids).
-- KEYS
--   workflows      the workflows with interrupts
--   newest         the workflow's index newest (and its buckets' directory, <newest>/d: see ix_add)
--   expiring       its index expiring (the same)
--   resolved       its closed index of resolved interrupts
--   cancelled      of cancelled ones
--   expired        of expired ones
--   pauses         the pause feed
--   reclaimed      the reconciler's mark in it
-- ARGV
--   workflow       the workflow
--   floor          the oldest end time the closed indexes keep
local live = redis.call('EXISTS', K.newest, K.expiring, K.newest .. BUCKET_DIRECTORY, K.expiring .. BUCKET_DIRECTORY)
for _, closed in ipairs({K.resolved, K.cancelled, K.expired}) do
  redis.call('ZREMRANGEBYLEX', closed, '-', '(' .. A.floor)
  live = live + redis.call('EXISTS', closed)
end
if live > 0 then return 0 end
redis.call('SREM', K.workflows, A.workflow)
if redis.call('SCARD', K.workflows) == 0 then redis.call('DEL', K.pauses, K.reclaimed) end
return 1
