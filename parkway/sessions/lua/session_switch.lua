-- Move a session's active head to one of its messages ('' = before the first message), and in the
-- same step deliver the answers kept for the branches the new head's path runs through (answered
-- while abandoned: session_answer), each exactly once; a kept answer whose run can no longer take
-- it (it ended, or was answered by its token) is dropped with an interrupt.undelivered event. The
-- caller prepares each delivery (resume.lua's KEYS and ARGV); when the kept answers due on the new
-- path are not the ones it prepared (a racing answer or switch changed them), or one was escalated
-- since it was read, nothing is written and the caller reads again ('retry').
-- KEYS: 1-8 the session's, then for each delivery its resume.lua KEYS
-- ARGV: 1 head, 2 now, 3 maxlen, 4 head.switched blob, 5 number of deliveries, then for each: its
--       request id, run id, number of KEYS, number of ARGV (0: the caller found it undeliverable),
--       interrupt.delivered blob, interrupt.undelivered blob, then its resume.lua ARGV
-- Returns {'ok', then per delivery: request id, run id, step, fence, handed off ('' when dropped)},
-- 'retry', 'gone' or 'no_message'.
local ttl = session_ttl()
if not ttl then return {'gone'} end
local head = ARGV[1]
if head ~= '' and redis.call('HEXISTS', S.up, head) == 0 then return {'no_message'} end
local on = path_of(S.up, head)
local due, given = {}, {}
local kat, at = SESSION_KEYS + 1, 6
for _ = 1, tonumber(ARGV[5]) do
  local nk, na = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local d = {req = ARGV[at], run = ARGV[at + 1], done = ARGV[at + 4], dropped = ARGV[at + 5],
    K = {unpack(KEYS, kat, kat + nk - 1)}, A = {unpack(ARGV, at + 6, at + 5 + na)}, na = na}
  due[#due + 1] = d
  given[d.req] = true
  kat, at = kat + nk, at + 6 + na
end
-- the kept answers due on the new path must be exactly the ones prepared
local kept = redis.call('HGETALL', S.dl)
for i = 1, #kept, 2 do
  local leaf = redis.call('HGET', S.live, kept[i + 1])
  if leaf and on[leaf] and not given[kept[i]] then return {'retry'} end
end
for _, d in ipairs(due) do
  if redis.call('HGET', S.dl, d.req) ~= d.run then return {'retry'} end
  if d.na > 0 then
    d.K, d.A = bind_call(SPEC.resume, d.K, d.A)
    d.refused = resume_refused(d.K, d.A, true)
    if d.refused and d.refused[1] == 'moved' then return {'retry'} end
  end
end
redis.call('HSET', S.s, 'head', head)
xadd(S.sev, ARGV[3], 'head.switched', ARGV[4])
local out = {'ok'}
for _, d in ipairs(due) do
  redis.call('HDEL', S.dl, d.req)
  if d.na == 0 or d.refused then
    xadd(S.sev, ARGV[3], 'interrupt.undelivered', d.dropped)
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = d.req, d.run, '', '', ''
  else
    local taken = resume_commit(d.K, d.A)
    xadd(S.sev, ARGV[3], 'interrupt.delivered', d.done)
    out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = d.req, d.run, taken[3], taken[4],
      taken[5]
  end
end
touch(ttl, ARGV[2])
return out
