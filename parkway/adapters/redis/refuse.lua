-- Record a refused answer in an interrupt's lifecycle record: an answer that did not fit the request
-- (InvalidAnswer, a contract's violation) leaves the interrupt open with the same token; its record
-- counts the refusals and keeps the last one (when, why). Only a pending interrupt before the
-- run's `expires` at `now` counts one.
-- KEYS: 1 run, 2 summary
-- ARGV: 1 token field, 2 now, 3 prefix of the status field, 4 prefix of the count field (f:),
--       5 prefix of the last refusal's field (fl:), 6 the refusal's blob
-- Returns the count so far, or 0 when the interrupt is not open.
local req = redis.call('HGET', KEYS[1], ARGV[1])
if not req then return 0 end
local cur = redis.call('HMGET', KEYS[1], ARGV[3] .. req, 'expires')
if cur[1] ~= 'pending' or tonumber(ARGV[2]) >= (tonumber(cur[2]) or 0) then return 0 end
redis.call('HSET', KEYS[2], ARGV[5] .. req, ARGV[6])
return redis.call('HINCRBY', KEYS[2], ARGV[4] .. req, 1)
