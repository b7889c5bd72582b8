-- Add a user message and dispatch its branch's run, in one step: `send` extends the active head,
-- `edit` forks a sibling of an edited message (below the edited message's parent). Refused, with
-- nothing written, when the path is parked (an interrupt anchored on it, or a global one) or, for
-- a send, when a run is live at the head (one live run per branch).
-- Returns {'ok', handed off}, {'retry'}, {'parked', ids...}, {'busy', run id}, {'no_message'},
-- {'gone'}.
-- KEYS
--   session: session  the session's keys
--   new: new_run   the branch run to dispatch (see create_run)
--   queues...      its first job's queues (see hand_off)
--   live...: live  the session's live runs, as the caller read them
-- ARGV
--   #queues        how many queues
--   #live          how many live runs
--   #job           how many job arguments
--   mode           send | edit
--   edited         the edited message ('' for send)
--   parent         the expected parent of the new message
--   message_id     the new message's id
--   message        its blob
--   now            ms
--   maxlen         the streams' cap
--   added          message.added blob
--   dispatched     run.dispatched blob
--   run_id         the new run's id
--   session_id     the session's id
--   new: new_run   (see KEYS)
--   live...: live  (see KEYS)
--   job...         the new run's first job (see hand_off)
local S = K.session
local ttl = session_ttl(S)
if not ttl then return {'gone'} end
local parent = A.parent
if A.mode == 'send' then
  if redis.call('HGET', S.hash, F.head) ~= parent then return {'retry'} end
else
  local p = redis.call('HGET', S.up, A.edited)
  if not p then return {'no_message'} end
  if p ~= parent then return {'retry'} end
end
local runs = live_runs(S, K.live, A.live)
if not runs then return {'retry'} end
local by = parking(S.open, S.deliveries, runs, path_of(S, parent))
if #by > 0 then return {'parked', unpack(by)} end
if A.mode == 'send' then
  for id, r in pairs(runs) do
    if r.leaf == parent and parent ~= '' then return {'busy', id} end
  end
end
if redis.call('HSETNX', S.messages, A.message_id, A.message) == 0 then
  return redis.error_reply('EXISTS message id is taken')
end
redis.call('HSET', S.up, A.message_id, parent)
move_head(S, A.message_id)
-- a branch run is its session's owner's and tenant's (written on it: the session may expire)
local handed = create_run(K.new, A.new, K.queues, A.job, session_authority(S, A.session_id))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
set_leaf(K.new.run, A.message_id)
redis.call('HSET', S.live, A.run_id, A.message_id)
sxadd(S, A.maxlen, 'message.added', A.added)
sxadd(S, A.maxlen, 'run.dispatched', A.dispatched)
touch(S, ttl, A.now)
return {'ok', handed}
