-- Take members out of an index, whichever form holds them (the single zset, its buckets: ix_rem in
-- _common.lua): the run index's walk drops the members whose summary is gone (Store.prune_runs).
-- Returns how many it took out.
-- KEYS
--   index          the index (its buckets' keys derived from it: see ix_add)
-- ARGV
--   members...     the members to take out
local n = 0
for _, m in ipairs(A.members) do n = n + ix_rem(K.index, m) end
return n
