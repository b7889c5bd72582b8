-- Read the messages on the path from the first message to `leaf`, oldest first, for a live branch
-- run of the session (anything else reads nothing: a session's messages are for its own runs).
-- KEYS: 1-8 the session's
-- ARGV: 1 leaf, 2 run id
if redis.call('HEXISTS', S.live, ARGV[2]) == 0 then
  return redis.error_reply('NOTBRANCH run is not a live branch run of its session')
end
local ids, m, n = {}, ARGV[1], 0
while m and m ~= '' and n < 100000 do
  ids[#ids + 1] = m
  n = n + 1
  m = redis.call('HGET', S.up, m)
end
local out = {}
for i = #ids, 1, -1 do
  out[#out + 1] = ids[i]
  out[#out + 1] = redis.call('HGET', S.m, ids[i]) or ''
end
return out
