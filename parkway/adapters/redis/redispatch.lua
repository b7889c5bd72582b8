-- A queued run whose job was lost before it began: move it to a new fence (so the lost job,
-- should it ever run, is stale) and a new outbox entry.
-- KEYS: 1 run, 2 outbox
-- ARGV: 1 run id, 2 step, 3 fence, 4 now, 5 outbox member
redis.call('ZREM', KEYS[2], ARGV[5])
local cur = redis.call('HMGET', KEYS[1], 'status', 'step', 'fence')
if cur[1] ~= 'queued' or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then return {'gone'} end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1] .. ':' .. cur[2] .. ':' .. fence)
return {'requeued', cur[2], fence}
