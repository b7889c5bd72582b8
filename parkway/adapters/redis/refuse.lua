-- Record a refused answer in an interrupt's lifecycle record: an answer that did not fit the request
-- (InvalidAnswer, a contract's violation) leaves the interrupt open with the same token; its record
-- counts the refusals and keeps the last one (when, why). Only the token's interrupt, pending
-- before the run's `expires` at `now`, counts one.
-- KEYS: 1 run, 2 summary
-- ARGV: 1 token field, 2 now, 3 the interrupt's status field, 4 its request id, 5 its lifecycle
--       record's count field (f:), 6 the last refusal's field (fl:), 7 the refusal's blob
-- Returns the count so far, or 0 when the interrupt is not open.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[4] then return 0 end
local cur = redis.call('HMGET', KEYS[1], ARGV[3], 'expires')
if cur[1] ~= 'pending' or tonumber(ARGV[2]) >= (tonumber(cur[2]) or 0) then return 0 end
hset_parts(KEYS[2], ARGV[6], ARGV[7])
return redis.call('HINCRBY', KEYS[2], ARGV[5], 1)
