-- A branch run's hook settled (a model reply, a tool result, a message the agent adds), or is
-- about to call out (`check`): record it in the run's journal, unless the branch is parked and the
-- mode is `void` (a model reply, a message: never committed, the call replays after the resume)
-- or `check` (nothing is called while parked). A settled tool result (`keep`) is recorded even on a
-- parked branch. When the branch is parked the run is then held: it waits, with no lease and no
-- job, until the interrupts parking it clear (session_clear wakes it). Held or not, this is the
-- point the run's follow-on is decided: nothing after it runs while parked.
-- KEYS: 1-8 the session's, 9 run, 10 journal, 11 run events, 12 leases
-- ARGV: 1 fence, 2 step, 3 run id, 4 mode (void | keep | check), 5 journal field, 6 entry blob,
--       7 message id ('' = none), 8 message blob, 9 now, 10 maxlen, 11 message.added blob,
--       12 run.held blob
local cur, err = check_fence(KEYS[9], ARGV[1], {'running'})
if not cur then return err end
if cur[3] ~= ARGV[2] then return stale('run is at step ' .. cur[3]) end
local ttl = session_ttl()
local leaf = redis.call('HGET', S.live, ARGV[3])
if not ttl or not leaf then return redis.error_reply('NOTBRANCH run is not a live branch run of its session') end
local parked = #parking(S.open, S.dl, {}, path_of(S.up, leaf)) > 0
local function hold()
  redis.call('HINCRBY', KEYS[9], 'fence', 1)
  redis.call('HSET', KEYS[9], 'status', 'waiting', 'waiting', 'session', 'expires', '', 'updated', ARGV[9])
  redis.call('ZREM', KEYS[12], ARGV[3])
  xadd_run(KEYS[9], KEYS[11], ARGV[10], 'run.held', ARGV[12])
  xadd(S.sev, ARGV[10], 'run.held', ARGV[12])
  touch(ttl, ARGV[9])
end
if parked and ARGV[4] ~= 'keep' then
  hold()
  return ARGV[4] == 'void' and 'voided' or 'held'
end
if ARGV[4] == 'check' then return 'ok' end
redis.call('HSET', KEYS[10], ARGV[5], ARGV[6])
if ARGV[7] ~= '' then
  if redis.call('HSETNX', S.m, ARGV[7], ARGV[8]) == 1 then
    redis.call('HSET', S.up, ARGV[7], leaf)
    redis.call('HSET', S.live, ARGV[3], ARGV[7])
    if redis.call('HGET', S.s, 'head') == leaf then redis.call('HSET', S.s, 'head', ARGV[7]) end
    xadd(S.sev, ARGV[10], 'message.added', ARGV[11])
  end
end
if parked then
  hold()
  return 'held'
end
touch(ttl, ARGV[9])
return 'ok'
