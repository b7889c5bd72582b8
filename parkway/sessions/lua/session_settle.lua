-- A branch run's hook settled (a model reply, a tool result, a message the agent adds), or is
-- about to call out (`check`): record it in the run's journal, unless the branch is parked and the
-- mode is `void` (a model reply, a message: never committed, the call replays after the resume)
-- or `check` (nothing is called while parked). A settled tool result (`keep`) is recorded even on a
-- parked branch. When the branch is parked the run is then held: it waits, with no lease and no
-- job, until the interrupts parking it clear (session_clear wakes it). Held or not, this is the
-- point the run's follow-on is decided: nothing after it runs while parked.
-- KEYS
--   session: session  the session's keys
--   run            the run's hash
--   journal        its journal (of its step)
--   events         its stream
--   leases         the leases
-- ARGV
--   fence          the fence of the job
--   step           its step
--   run_id         the run
--   mode           void | keep | check
--   field          the journal field
--   entry          the journal entry blob
--   message_id     a message the hook adds ('' = none)
--   message        its blob
--   now            ms
--   maxlen         the streams' cap
--   added          message.added blob
--   held           run.held blob
--   path_to        a check only: also read the path from the first message to this one ('' =
--                  none): the reply is then {'ok', id, message blob, ...}, oldest first (the
--                  attempt's `messages`, read in the step that finds its branch not parked)
local S = K.session
local cur, err = check_fence(hmget(K.run, {F.fence, F.status, F.step}), A.fence, {'running'})
if not cur then return err end
if cur.step ~= A.step then return stale('run is at step ' .. cur.step) end
local ttl = session_ttl(S)
local leaf = redis.call('HGET', S.live, A.run_id)
if not ttl or not leaf then return redis.error_reply('NOTBRANCH run is not a live branch run of its session') end
local parked = #parking(S.open, S.deliveries, {}, path_of(S, leaf)) > 0
local function hold()
  redis.call('HINCRBY', K.run, F.fence, 1)
  redis.call('HSET', K.run, F.status, V.waiting, F.waiting, V.session, F.expires, '', F.updated, A.now)
  redis.call('ZREM', K.leases, A.run_id)
  xadd_run(K.run, K.events, A.maxlen, 'run.held', A.held)
  sxadd(S, A.maxlen, 'run.held', A.held)
  touch(S, ttl, A.now)
end
if parked and A.mode ~= 'keep' then
  hold()
  return A.mode == 'void' and 'voided' or 'held'
end
if A.mode == 'check' then
  if A.path_to == '' then return 'ok' end
  local ids, m, n = {}, A.path_to, 0
  while m and m ~= '' and n < 100000 do
    ids[#ids + 1] = m
    n = n + 1
    m = redis.call('HGET', S.up, m)
  end
  local out = {'ok'}
  for i = #ids, 1, -1 do
    out[#out + 1] = ids[i]
    out[#out + 1] = redis.call('HGET', S.messages, ids[i]) or ''
  end
  return out
end
redis.call('HSET', K.journal, A.field, A.entry)
if A.message_id ~= '' then
  if redis.call('HSETNX', S.messages, A.message_id, A.message) == 1 then
    redis.call('HSET', S.up, A.message_id, leaf)
    redis.call('HSET', S.live, A.run_id, A.message_id)
    if redis.call('HGET', S.hash, F.head) == leaf then move_head(S, A.message_id) end
    sxadd(S, A.maxlen, 'message.added', A.added)
  end
end
if parked then
  hold()
  return 'held'
end
touch(S, ttl, A.now)
return 'ok'
