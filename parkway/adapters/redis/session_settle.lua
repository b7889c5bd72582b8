-- A branch run's hook settled (a model reply, a tool result, a message the agent adds): record it
-- in the run's journal, unless the branch is parked and the mode is `void` (a model reply, a
-- message: never committed, the call replays after the resume). A settled tool result (`keep`) is
-- recorded even on a parked branch. When the branch is parked the run is then held: it waits,
-- with no lease and no job, until the interrupts parking it clear (session_clear wakes it). Held
-- or not, this is the point the run's follow-on is decided: nothing after it runs while parked.
-- KEYS: 1 run, 2 journal, 3 run events, 4 leases, 5 session, 6 up, 7 open, 8 live, 9 session events,
--       10 messages, 11 deliveries
-- ARGV: 1 fence, 2 step, 3 run id, 4 mode (void | keep), 5 journal field, 6 entry blob,
--       7 message id ('' = none), 8 message blob, 9 now, 10 maxlen, 11 message.added blob,
--       12 run.held blob
local cur, err = check_fence(KEYS[1], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
local leaf = redis.call('HGET', KEYS[8], ARGV[3])
if not leaf then return redis.error_reply('NOTBRANCH run is not a live branch run of its session') end
local parked = #parking(KEYS[7], KEYS[11], {}, path_of(KEYS[6], leaf)) > 0
local function hold()
  redis.call('HINCRBY', KEYS[1], 'fence', 1)
  redis.call('HSET', KEYS[1], 'status', 'waiting', 'waiting', 'session', 'expires', '', 'updated', ARGV[9])
  redis.call('ZREM', KEYS[4], ARGV[3])
  xadd(KEYS[3], ARGV[10], 'run.held', ARGV[12])
  xadd(KEYS[9], ARGV[10], 'run.held', ARGV[12])
end
if parked and ARGV[4] == 'void' then
  hold()
  return 'voided'
end
redis.call('HSET', KEYS[2], ARGV[5], ARGV[6])
if ARGV[7] ~= '' then
  if redis.call('HSETNX', KEYS[10], ARGV[7], ARGV[8]) == 1 then
    redis.call('HSET', KEYS[6], ARGV[7], leaf)
    redis.call('HSET', KEYS[8], ARGV[3], ARGV[7])
    if redis.call('HGET', KEYS[5], 'head') == leaf then redis.call('HSET', KEYS[5], 'head', ARGV[7]) end
    xadd(KEYS[9], ARGV[10], 'message.added', ARGV[11])
  end
end
if parked then
  hold()
  return 'held'
end
return 'ok'
