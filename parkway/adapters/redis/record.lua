-- Write one journal entry or workflow state value (write-through), maybe with an event.
-- KEYS: 1 run, 2 target hash (journal or workflow state), 3 journal, 4 workflow state, 5 events,
--       6 summary
-- ARGV: 1 fence, 2 field, 3 blob, 4 event type ('' for none), 5 event blob, 6 maxlen, 7 retention ms
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] ~= '' then xadd_run(KEYS[1], KEYS[5], ARGV[6], ARGV[4], ARGV[5]) end
local ttl = redis.call('HGET', KEYS[1], 'ttl')
expire_all(ttl, {KEYS[1], KEYS[3], KEYS[4], KEYS[5]})
keep_summary(KEYS[6], ttl, ARGV[7])
return 1
