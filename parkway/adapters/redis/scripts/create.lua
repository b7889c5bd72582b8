-- Create a queued run with its summary, first events and outbox entry (see create_run); the same start
-- again returns as the first did (same_start).
-- KEYS
--   new: new_run   the run
--   queues...      its first job's queues (see hand_off)
-- ARGV
--   new: new_run   the run
--   authority      whose it is (`tenant=<id> owner=<id> origin=<rank>`, see authority_arg)
--   job...         its first job (see hand_off)
-- A start sent again (a retry after an unknown outcome) with the same workflow, input and authority
-- finds its run: it returns as the first did, handed off (the first's job, or the outbox, runs it).
-- Anything else under a taken id is refused.
local function same_start(run, a, auth)
  local had = hmget(run, {F.wf, F.input, F.tenant, F.owner, F.origin})
  if had.wf ~= a.workflow or had.input ~= a.input then return false end
  local want = {}
  for i = 1, #auth, 2 do want[auth[i]] = auth[i + 1] end
  return had.tenant == (want[F.tenant] or false) and had.owner == (want[F.owner] or false)
    and had.origin == (want[F.origin] or false)
end

local auth = authority_arg(A.authority)
local handed = create_run(K.new, A.new, K.queues, A.job, auth)
if handed ~= nil then return handed end
if same_start(K.new.run, A.new, auth) then return 1 end
return redis.error_reply('EXISTS run id is taken')
