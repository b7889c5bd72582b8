-- Shared by every script (prepended when loading).
local function stale(msg) return redis.error_reply('STALE ' .. msg) end

-- Check that the run exists, is at `fence` and in one of `statuses`.
local function check_fence(run_key, fence, statuses)
  local cur = redis.call('HMGET', run_key, 'fence', 'status', 'step')
  if not cur[1] then return nil, stale('run is gone') end
  if cur[1] ~= fence then return nil, stale('run is at fence ' .. cur[1] .. ', the job has ' .. fence) end
  for _, s in ipairs(statuses) do
    if cur[2] == s then return cur end
  end
  return nil, stale('run is ' .. cur[2])
end

local function expire_all(ttl, keys)
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ttl) end
end

-- The summary outlives the run's records by the retention (so an expired run reads expired, not
-- unknown): every script that renews the records renews it with them.
local function keep_summary(summary, records_ttl, retention)
  redis.call('PEXPIRE', summary, tonumber(records_ttl) + tonumber(retention))
end

-- The records' remaining life, for scripts that end a run without renewing them.
local function records_left(run_key)
  local left = redis.call('PTTL', run_key)
  if left < 0 then return 0 end
  return left
end

local function xadd(stream, maxlen, kind, blob)
  return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 't', kind, 'd', blob)
end

-- Enqueue the RQ job that carries a transition on, as RQ's unique enqueue does (its job hash
-- unless one exists, then the queue push), if the transition landed on the handoff's step and
-- fence. `keys` holds the job hash, the queue and RQ's set of queues; `args` from `at` on:
-- step ('' = no handoff), fence, job id, then the job hash's field/value pairs.
local function hand_off(keys, args, at, step, fence)
  if args[at] == '' or tonumber(args[at]) ~= tonumber(step) or tonumber(args[at + 1]) ~= tonumber(fence) then
    return 0
  end
  if redis.call('EXISTS', keys[1]) == 0 then
    redis.call('HSET', keys[1], unpack(args, at + 3))
    redis.call('RPUSH', keys[2], args[at + 2])
  end
  redis.call('SADD', keys[3], keys[2])
  return 1
end
