-- Read indexes, each in both its forms: the single zset written before format 4 and its buckets (see
-- ix_add in _common.lua), as one read: a page is one consistent view, however buckets split or empty
-- between two pages (a cursor is a member: the next page starts past it, in whichever bucket).
-- Read-only (a function flagged no-writes).
-- Returns one reply per index: for asc and desc, the pair {the single zset's members, the buckets'},
-- each in the read's order and at most `limit` long (the caller merges them: Lua compares no
-- strings); for count, how many members both hold in the range.
-- KEYS
--   indexes...     the indexes read (their buckets' keys are derived from each: keys.bucket_directory,
--                  bucket, bucket_count)
-- ARGV
--   #indexes       how many
--   reads...       four values per index: what (asc | desc | count), low, high (bounds as ZRANGEBYLEX
--                  takes them: - + [m (m; low first in either order), limit (asc, desc)
local function ix_first(dir) return redis.call('ZRANGE', dir, 0, 0)[1] end
local function ix_last(dir) return redis.call('ZRANGE', dir, -1, -1)[1] end

-- The buckets a range's members are in, in the read's order, one at a time (an iterator), from the
-- bucket its starting bound falls in (the first or last bucket for '-' or '+'; the first, when the
-- bound is below every bucket's). A bucket past the first that holds none of the range's members
-- ends it (the caller says so: `ended`): every bucket between the first and the last holds only
-- members in the range, and is never empty (ix_rem drops an emptied one), so no last bucket needs
-- finding first.
local function walk(dir, from, down)
  local entry
  if from == '-' then
    entry = ix_first(dir)
  elseif from == '+' then
    entry = ix_last(dir)
  else
    entry = ix_entry(dir, string.sub(from, 2)) or (not down and ix_first(dir))
  end
  local given = 0
  return function(ended)
    if not entry then return nil end
    if given > 0 then
      if ended and given > 1 then return nil end
      local command = down and 'ZREVRANGEBYLEX' or 'ZRANGEBYLEX'
      local past = '(' .. entry
      entry = redis.call(command, dir, past, down and '-' or '+', 'LIMIT', 0, 1)[1]
      if not entry then return nil end
    end
    given = given + 1
    return entry
  end
end

local function bucket_range(ix, low, high, limit, down)
  local dir, out = ix .. BUCKET_DIRECTORY, {}
  local next_bucket, ended = walk(dir, down and high or low, down), false
  while true do
    local entry = next_bucket(ended)
    if not entry then return out end
    local bucket, got = ix_bucket(dir, entry), nil
    if down then
      got = redis.call('ZREVRANGEBYLEX', bucket, high, low, 'LIMIT', 0, limit - #out)
    else
      got = redis.call('ZRANGEBYLEX', bucket, low, high, 'LIMIT', 0, limit - #out)
    end
    for _, m in ipairs(got) do out[#out + 1] = m end
    if #out >= limit then return out end
    ended = #got == 0
  end
end

-- the buckets' members from the lowest up to `high`
local function bucket_count_to(ix, high)
  local dir, n, ended = ix .. BUCKET_DIRECTORY, 0, false
  local next_bucket = walk(dir, '-', false)
  while true do
    local entry = next_bucket(ended)
    if not entry then return n end
    local got = redis.call('ZLEXCOUNT', ix_bucket(dir, entry), '-', high)
    n = n + got
    ended = got == 0
  end
end

local function complement(bound)  -- the high bound of the members below a low bound
  return (string.sub(bound, 1, 1) == '[' and '(' or '[') .. string.sub(bound, 2)
end

-- The buckets' members in the range: their count (`n`) less those below it, counted from the lowest
-- bucket up (a range up to the end, such as the unexpired members of an index expiring, walks only
-- the buckets below it: the expired backlog's, usually none or one).
local function bucket_count(ix, low, high)
  local total = tonumber(redis.call('HGET', ix .. BUCKET_COUNT, 'n') or '0')
  if total == 0 then return 0 end
  local below = low == '-' and 0 or bucket_count_to(ix, complement(low))
  local upto = high == '+' and total or bucket_count_to(ix, high)
  return math.max(0, upto - below)
end

local out = {}
for i, ix in ipairs(K.indexes) do
  local at = (i - 1) * 4
  local what, low, high, limit = A.reads[at + 1], A.reads[at + 2], A.reads[at + 3], tonumber(A.reads[at + 4])
  if what == 'count' then
    out[i] = redis.call('ZLEXCOUNT', ix, low, high) + bucket_count(ix, low, high)
  elseif what == 'desc' then
    out[i] = {redis.call('ZREVRANGEBYLEX', ix, high, low, 'LIMIT', 0, limit), bucket_range(ix, low, high, limit, true)}
  else
    out[i] = {redis.call('ZRANGEBYLEX', ix, low, high, 'LIMIT', 0, limit), bucket_range(ix, low, high, limit, false)}
  end
end
return out
