-- Create a queued run with its summary, first events and outbox entry (see create_run).
-- KEYS: 1 run, 2 summary, 3 events, 4 outbox, 5-6 the next job's queues (see hand_off)
-- ARGV: 1 workflow, 2 ref, 3 start node, 4 input blob, 5 ttl ms, 6 now, 7 retention ms,
--       8 maxlen, 9 run.started blob, 10 outbox member, 11 authority (`tenant=<id> owner=<id> origin=<rank>`, see authority_arg), 12... the next job
--       (see hand_off)
local handed = create_run(KEYS, ARGV, 1, 12, nil, authority_arg(ARGV[11]))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
return handed
