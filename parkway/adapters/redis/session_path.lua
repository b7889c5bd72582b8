-- Read the messages on the path from the first message to `leaf`, oldest first (read only).
-- KEYS: 1 up, 2 messages
-- ARGV: 1 leaf
local ids, m, n = {}, ARGV[1], 0
while m and m ~= '' and n < 100000 do
  ids[#ids + 1] = m
  n = n + 1
  m = redis.call('HGET', KEYS[1], m)
end
local out = {}
for i = #ids, 1, -1 do
  out[#out + 1] = ids[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], ids[i]) or ''
end
return out
