-- Escalate an interrupt past its TTL: ask the same question again, under the same token, of
-- another audience with a new expiry. The interrupt stays pending; its expiry (the run's `expires`),
-- its record (new expiry, audience and remaining policy) and its index members move, and the run's
-- stream gets interrupt.expired (saying it escalated) and then a fresh interrupt event.
-- Exactly once against a racing resume: this script acts only on an interrupt still pending at
-- the expiry the caller read (`expires at`), past it at `now`; a resume that read the old expiry
-- gets 'moved' from resume.lua and answers the escalated one (see resume.lua).
-- KEYS: 1 run, 2 events, 3 summary, 4 the workflow's index newest, 5 its index expiring,
--       6 journal of the interrupt's step, 7 workflow state, 8 pause feed,
--       9... ARGV[17] filter indexes it leaves, then ARGV[18] it joins, then ANCESTOR_KEYS (6) keys per ancestor
--       of a child run: events, run, journal of the step waiting, workflow state, summary; last: the
--       run's snapshots (see advance.lua), kept as long as the run
-- ARGV: 1 request id, 2 now, 3 member newest, 4 member expiring, 5 new member newest,
--       6 new member expiring, 7 status field, 8 expires at (as read), 9 new expires at,
--       10 maxlen, 11 interrupt.expired blob, 12 interrupt event blob, 13 new ttl ms, 14 grace ms,
--       15 retention ms, 16 workflow name, 17 number of filter indexes left, 18 number joined,
--       19 pause feed maxlen, 20 run id, 21... the record's fields as pairs: rq and the interrupt's
--       name in the run hash (keys.held_id), rn and its number of parts, then each part's field and part
-- Returns {'pending'}, {'gone'} (resolved, expired, or moved on: old members only removed) or
-- {'escalated', fence}.
local state = redis.call('HMGET', KEYS[1], ARGV[7], 'expires', 'status', 'waiting', 'rq', 'rn')
local current = state[2] == ARGV[8]
if current and state[1] == 'pending' and tonumber(ARGV[2]) < (tonumber(state[2]) or 0) then return {'pending'} end
local left = 9 + tonumber(ARGV[17])  -- the first index joined
local ancestors = left + tonumber(ARGV[18])
redis.call('ZREM', KEYS[4], ARGV[3])
redis.call('ZREM', KEYS[5], ARGV[4])
for i = 9, left - 1 do redis.call('ZREM', KEYS[i], ARGV[3]) end
if not current or state[1] ~= 'pending' or state[3] ~= 'waiting' or state[4] ~= ARGV[1] or state[5] ~= ARGV[22] then
  return {'gone'}
end
redis.call('ZADD', KEYS[4], 0, ARGV[5])
redis.call('ZADD', KEYS[5], 0, ARGV[6])
for i = left, ancestors - 1 do redis.call('ZADD', KEYS[i], 0, ARGV[5]) end
for i = 0, tonumber(state[6]) - 1 do redis.call('HDEL', KEYS[1], 'r' .. i) end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'expires', ARGV[9], 'updated', ARGV[2], unpack(ARGV, 21))
xadd_run(KEYS[1], KEYS[2], ARGV[10], 'interrupt.expired', ARGV[11])
xadd_run(KEYS[1], KEYS[2], ARGV[10], 'interrupt', ARGV[12])
for i = ancestors, #KEYS - 1, ANCESTOR_KEYS do xadd_run(KEYS[i + 1], KEYS[i], ARGV[10], 'interrupt', ARGV[12]) end
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[19], '*', 'w', ARGV[16], 'r', ARGV[20])
local held = tonumber(ARGV[13]) + tonumber(ARGV[14])
expire_all(held, {KEYS[1], KEYS[2], KEYS[6], KEYS[7], KEYS[#KEYS]})
keep_summary(KEYS[3], held, ARGV[15])
keep_ancestors(ancestors, #KEYS - 1, held, ARGV[15])
return {'escalated', fence}
