-- Read the interrupt a token names, and whether it can still be answered: pending until the run's
-- `expires` (the interrupt's) has passed at `now`, and its run's workflow reference (for the resume's
-- check of the code version).
-- KEYS: 1 run, 2 summary
-- ARGV: 1 token field, 2 now, 3 prefix of the status field
-- Returns {status}, {status, request id}, or, when the run holds the interrupt's record,
-- {status, request id, workflow, workflow reference, the record's parts in order}; the request id
-- as the run hash names it (keys.held_id: without its run id; telemetry.full_id reads it back).
local req = redis.call('HGET', KEYS[1], ARGV[1])
if not req then
  if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 1 then return {'expired'} end
  return {'unknown'}
end
local cur = redis.call('HMGET', KEYS[1], ARGV[3] .. req, 'expires', 'rq', 'rn', 'wf', 'ref')
local status = cur[1]
if status == 'pending' and tonumber(ARGV[2]) >= (tonumber(cur[2]) or 0) then status = 'expired' end
local out = {status, req, cur[5], cur[6] or ''}
if cur[3] == req then
  for i = 0, tonumber(cur[4]) - 1 do out[#out + 1] = redis.call('HGET', KEYS[1], 'r' .. i) end
else  -- an earlier interrupt of the run: its parts under names of its own
  local i = 0
  while true do
    local part = redis.call('HGET', KEYS[1], 'r:' .. req .. ':' .. i)
    if not part then break end
    out[#out + 1] = part
    i = i + 1
  end
end
if #out == 4 then return {status, req} end
return out
