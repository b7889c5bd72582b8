-- An answer kept for an abandoned branch was delivered to its run (by token): drop it, once.
-- KEYS: 1 deliveries, 2 session events
-- ARGV: 1 request id, 2 maxlen, 3 event blob
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
xadd(KEYS[2], ARGV[2], 'interrupt.delivered', ARGV[3])
return 1
