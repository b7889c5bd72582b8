-- RQ's unique enqueue (rq.scripts.UNIQUE_ENQUEUE_SCRIPT) of the job that carries a transition on,
-- written by the script that commits the transition, for the `step` and `fence` it just wrote: the
-- job hash unless one exists, then the push on the queue, and the queue in RQ's set of queues (by
-- the push that finds the queue empty, or a job already there).
-- Assigns `hand_off`, which _common.lua declares. The names after a dollar sign are filled in by
-- job_format.py (hand_off_lua) from RQ's job format: the arguments' names, the fields per job.
-- `keys`: the queue, RQ's set of queues. `args` from `at` on ('' = enqueue nothing): the named
-- arguments, then the job hash's fixed field/value pairs (up to `last`, else to the end).
-- The job key is the one key name built in Lua, from the prefix and the fence: it depends on a
-- value only this script knows (the fence it wrote). RQ's job keys carry no hash tag, as the queue
-- does not: the hand-off is single-instance Redis only.
function hand_off(keys, args, at, step, fence, last)
  if args[at] == '' then return 0 end
  local $names = $reads
  local queue, queues = unpack(keys)
  local id = id_head .. fence
  local job = key_prefix .. id
  -- the queue is registered by the push that finds it empty: a queue with ids in it was registered
  -- by the push that put its first one there (RQ unregisters a queue only with its list:
  -- Queue.delete), so a push behind others registers nothing again
  if redis.call('EXISTS', job) == 0 then
    redis.call('HSET', job, $fields, unpack(args, at + $fixed_at, last))
    if redis.call('RPUSH', queue, id) > 1 then return 1 end
  end
  redis.call('SADD', queues, queue)
  return 1
end

-- Format 3 (a resume that begins its attempt: begin_at_resume in _resume.lua). Whether the job's
-- queue is empty (a worker likely waits on it), when a job is asked for at all.
function hand_off_idle(keys, args, at)
  local queue = unpack(keys)
  return args[at] ~= '' and redis.call('LLEN', queue) == 0
end

-- Push the element `<job id> <tail>` (the tail: the begun attempt) for the `fence` just written, and
-- register the queue: no job hash (the worker runs the element, RQ never reads it). Returns 2 (a
-- plain hand-off's 1: enqueued, and begun).
function hand_off_begun(keys, args, at, fence, tail)
  local $names = $reads
  local queue, queues = unpack(keys)
  redis.call('RPUSH', queue, id_head .. fence .. ' ' .. tail)
  redis.call('SADD', queues, queue)
  return 2
end
