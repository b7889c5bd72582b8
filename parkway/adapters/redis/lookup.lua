-- Read the interrupt a token hash names, and whether it can still be answered.
-- KEYS: 1 run, 2 interrupts, 3 pending, 4 summary
-- ARGV: 1 token hash
local req = redis.call('HGET', KEYS[2], 't:' .. ARGV[1])
if not req then
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[4]) == 1 then return {'expired'} end
  return {'unknown'}
end
local status = redis.call('HGET', KEYS[2], 's:' .. req)
if status == 'pending' and redis.call('EXISTS', KEYS[3]) == 0 then status = 'expired' end
return {status, redis.call('HGET', KEYS[2], 'r:' .. req)}
