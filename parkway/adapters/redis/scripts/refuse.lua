-- Record a refused answer in an interrupt's lifecycle record: an answer that did not fit the request
-- (InvalidAnswer, a contract's violation) leaves the interrupt open with the same token; its record
-- counts the refusals and keeps the last one (when, why). Only the token's interrupt, pending
-- before the run's `expires` at `now`, counts one.
-- Returns the count so far, or 0 when the interrupt is not open.
-- KEYS
--   run            the run's hash
--   summary        the run's summary (the lifecycle records)
-- ARGV
--   token_field    the token's field in the run hash
--   now            ms
--   status_field   the interrupt's status field
--   request_id     the interrupt, as the run hash names it (layout.short_id)
--   count_field    its lifecycle record's count of refusals (f:)
--   last_field     the last refusal's field (fl:)
--   refusal        the refusal's blob
if (redis.call('HGET', K.run, A.token_field) or legacy_token(K.run, A.token_field)) ~= A.request_id then return 0 end
local cur = hmget(K.run, {A.status_field, F.expires})
if cur[A.status_field] ~= 'pending' or tonumber(A.now) >= (tonumber(cur.expires) or 0) then return 0 end
hset_parts(K.summary, A.last_field, A.refusal)
return redis.call('HINCRBY', K.summary, A.count_field, 1)
