-- Create a queued run with its summary, its run.started event and outbox entry (node.started is
-- the job's, written when a worker begins the node: begin.lua).
-- KEYS: 1 run, 2 summary, 3 events, 4 outbox, 5-6 the next job's queues (see hand_off)
-- ARGV: 1 workflow, 2 ref, 3 start node, 4 input blob, 5 ttl ms, 6 now, 7 retention ms,
--       8 maxlen, 9 run.started blob, 10 outbox member, 11... the next job (see hand_off)
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  return redis.error_reply('EXISTS run id is taken')
end
redis.call('HSET', KEYS[1], 'wf', ARGV[1], 'ref', ARGV[2], 'status', 'queued', 'node', ARGV[3],
  'step', 0, 'fence', 0, 'input', ARGV[4], 'data', ARGV[4], 'created', ARGV[6], 'updated', ARGV[6],
  'ttl', ARGV[5])
redis.call('HSET', KEYS[2], 'wf', ARGV[1], 'status', 'queued', 'created', ARGV[6], 'updated', ARGV[6])
keep_summary(KEYS[2], ARGV[5], ARGV[7])
xadd(KEYS[3], ARGV[8], 'run.started', ARGV[9])
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[10])
expire_all(ARGV[5], {KEYS[1], KEYS[3]})
return hand_off({KEYS[5], KEYS[6]}, ARGV, 11, 0, 0)
