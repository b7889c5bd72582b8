-- A use_first race a child run won: the interrupt it raced (recorded cancelled by the child's end,
-- notify_parent) leaves its indexes, and its lifecycle record ends cancelled with reason "child",
-- as a timer's win does in expire.lua. Run once, from the replay that takes the child's win: an
-- interrupt no longer recorded cancelled, or whose record already ended (a cancel_interrupt, the
-- timer), is left alone.
-- Returns 1 when it closed the interrupt, 0 when there was nothing to do.
-- KEYS
--   run            the run's hash
--   summary        the run's summary
--   newest         the workflow's index newest (its member leaves its buckets too: ix_rem)
--   expiring       its index expiring
--   closing: closing  the workflow's index of cancelled interrupts
--   filters...     the interrupt's filter indexes
-- ARGV
--   status_field   the interrupt's status field
--   member_newest  its member in the index newest (and the filter indexes)
--   member_expiring  its member in the index expiring
--   closing: closing  its lifecycle record's end
if redis.call('HGET', K.run, A.status_field) ~= 'cancelled' then return 0 end
if redis.call('HEXISTS', K.summary, A.closing.end_field .. ':0') == 1 then return 0 end
ix_rem(K.newest, A.member_newest)
ix_rem(K.expiring, A.member_expiring)
for _, index in ipairs(K.filters) do ix_rem(index, A.member_newest) end
write_closing(K.summary, K.closing, A.closing)
return 1
