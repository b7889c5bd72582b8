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

local function xadd(stream, maxlen, kind, blob)
  return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 't', kind, 'd', blob)
end
