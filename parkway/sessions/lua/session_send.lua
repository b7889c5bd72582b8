-- Add a user message and dispatch its branch's run, in one step: `send` extends the active head,
-- `edit` forks a sibling of an edited message (below the edited message's parent). Refused, with
-- nothing written, when the path is parked (an interrupt anchored on it, or a global one) or, for
-- a send, when a run is live at the head (one live run per branch).
-- KEYS: 1-8 the session's, 9 run, 10 run summary, 11 run events, 12 outbox, 13-14 the run's first
--       job's queues (see hand_off), 15... the run hashes of the session's live runs
-- ARGV: 1 mode (send | edit), 2 edited message ('' for send), 3 expected parent, 4 new message id,
--       5 message blob, 6 now, 7 maxlen, 8 message.added blob, 9 run.dispatched blob, 10 run id,
--       11 live count, 12 session id, 13-22 the run (see create_run), 23... the live run ids, then the
--       job (hand_off)
local ttl = session_ttl()
if not ttl then return {'gone'} end
local parent = ARGV[3]
if ARGV[1] == 'send' then
  if redis.call('HGET', S.s, 'head') ~= parent then return {'retry'} end
else
  local p = redis.call('HGET', S.up, ARGV[2])
  if not p then return {'no_message'} end
  if p ~= parent then return {'retry'} end
end
local count = tonumber(ARGV[11])
local runs = live_runs(S.live, 15, 23, count)
if not runs then return {'retry'} end
local by = parking(S.open, S.dl, runs, path_of(S.up, parent))
if #by > 0 then return {'parked', unpack(by)} end
if ARGV[1] == 'send' then
  for id, r in pairs(runs) do
    if r.leaf == parent and parent ~= '' then return {'busy', id} end
  end
end
if redis.call('HSETNX', S.m, ARGV[4], ARGV[5]) == 0 then return redis.error_reply('EXISTS message id is taken') end
redis.call('HSET', S.up, ARGV[4], parent)
redis.call('HSET', S.s, 'head', ARGV[4])
-- a branch run is its session's owner's and tenant's (written on it: the session may expire)
local new_keys = {run = KEYS[9], summary = KEYS[10], events = KEYS[11], outbox = KEYS[12]}
local handed = create_run(new_keys, bind(SPEC.new_run.argv, ARGV, 13), {KEYS[13], KEYS[14]}, {unpack(ARGV, 23 + count)},
  session_authority(ARGV[12]))
if handed == nil then return redis.error_reply('EXISTS run id is taken') end
set_leaf(KEYS[9], ARGV[4])
redis.call('HSET', S.live, ARGV[10], ARGV[4])
xadd(S.sev, ARGV[7], 'message.added', ARGV[8])
xadd(S.sev, ARGV[7], 'run.dispatched', ARGV[9])
touch(ttl, ARGV[6])
return {'ok', handed}
