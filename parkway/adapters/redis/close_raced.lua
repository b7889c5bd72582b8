-- A use_first race a child run won: the interrupt it raced (recorded cancelled by the child's end,
-- notify_parent) leaves its indexes, and its lifecycle record ends cancelled with reason "child",
-- as a timer's win does in expire.lua. Run once, from the replay that takes the child's win: an
-- interrupt no longer recorded cancelled, or whose record already ended (a cancel_interrupt, the
-- timer), is left alone.
-- KEYS: 1 run, 2 summary, 3 the workflow's index newest, 4 its index expiring, 5 the workflow's
--       index of cancelled interrupts, 6... the interrupt's filter indexes
-- ARGV: 1 status field, 2 member newest, 3 member expiring, 4 the lifecycle field of its end
--       (e:<req>), 5 its blob, 6 the closed index member, 7 the oldest end time the closed index
--       keeps, 8 the lifecycle record's first part's field (i:<req>), 9 its blob
-- Returns 1 when it closed the interrupt, 0 when there was nothing to do.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= 'cancelled' then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[4] .. ':0') == 1 then return 0 end
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[3])
for i = 6, #KEYS do redis.call('ZREM', KEYS[i], ARGV[2]) end
hset_parts(KEYS[2], ARGV[4], ARGV[5])
if ARGV[9] ~= '' then hset_parts(KEYS[2], ARGV[8], ARGV[9]) end
redis.call('ZADD', KEYS[5], 0, ARGV[6])
redis.call('ZREMRANGEBYLEX', KEYS[5], '-', '(' .. ARGV[7])
return 1
