-- Read the messages on the path from the first message to `leaf`, oldest first, for a live branch
-- run of the session (anything else reads nothing: a session's messages are for its own runs).
-- KEYS
--   session: session  the session's keys
-- ARGV
--   leaf           the last message of the path
--   run_id         the branch run reading it
local S = K.session
if redis.call('HEXISTS', S.live, A.run_id) == 0 then
  return redis.error_reply('NOTBRANCH run is not a live branch run of its session')
end
local ids, m, n = {}, A.leaf, 0
while m and m ~= '' and n < 100000 do
  ids[#ids + 1] = m
  n = n + 1
  m = redis.call('HGET', S.up, m)
end
local out = {}
for i = #ids, 1, -1 do
  out[#out + 1] = ids[i]
  out[#out + 1] = redis.call('HGET', S.messages, ids[i]) or ''
end
return out
