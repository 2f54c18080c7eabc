--[[
  One bounded step of a compaction round over one partition of a compacted event type
  (docs/concepts.md "Retention and compaction").
  Looks at up to ARGV[3] stream entries from offset ARGV[2] on, stopping before the first event received
  in or after the cut-off second (the compaction lag), and deletes (XDEL) every entry whose compaction
  key has a newer event, a tombstone after it, or no index field at all (its key was deleted and its
  tombstone already passed). Entries without a key (written before the event type became compacted) stay.
  Surviving entries keep their ids, so offsets never change. When the step reaches the cut-off, the
  round is complete: tombstones whose offset it passed are dropped, and with ARGV[4] = 1 (policy
  `compact`, no retention) the time index below the cut-off second too.

  Rule for an entry at offset o with key k, index value v = HGET KEYS[4] k:
    v absent -> delete;  v = `d<m>` -> delete when o < m;  v = <n> -> delete when n > o.

  KEYS[1] partition meta     (hash)   `next`, `oldest`
  KEYS[2] partition log      (stream) entry id `<offset after the entry>-0`; compacted entries: n = 1, d, k
  KEYS[3] time index         (zset)   member = first offset received in a second, score = unix second
  KEYS[4] compaction index   (hash)   key -> newest offset or `d<offset>`
  KEYS[5] tombstones         (zset)   member = key, score = tombstone offset

  ARGV[1] cut-off            (unix seconds; only events received in an earlier second are compacted)
  ARGV[2] from               (offset where this step starts; below `oldest` means `oldest`)
  ARGV[3] max entries        (integer >= 1; also bounds the tombstones dropped per step)
  ARGV[4] trim time index    (1 = drop time index members below the cut-off; 0 = keep them for retention)

  Returns { next from (offset), done (1 = the round reached the cut-off), entries deleted, tombstones dropped }.
]]
local cutoff = tonumber(ARGV[1])
local from = tonumber(ARGV[2])
local max = tonumber(ARGV[3])
local next_offset = tonumber(redis.call('HGET', KEYS[1], 'next') or '0')
local oldest = tonumber(redis.call('HGET', KEYS[1], 'oldest') or '0')
if from < oldest then from = oldest end
-- The first offset received in or after the cut-off second: compaction stays below it.
local young = redis.call('ZRANGEBYSCORE', KEYS[3], cutoff, '+inf', 'LIMIT', 0, 1)
local limit = next_offset
if #young > 0 then limit = tonumber(young[1]) end

local deleted = 0
local done = 1
if from < limit then
  -- Entries holding offsets from .. limit - 1 have ids from + 1 .. limit.
  local entries = redis.call('XRANGE', KEYS[2], (from + 1) .. '-0', limit .. '-0', 'COUNT', max)
  for _, entry in ipairs(entries) do
    local id = entry[1]
    local fields = entry[2]
    local offset = tonumber(string.match(id, '^(%d+)')) - 1
    local key = nil
    for j = 1, #fields, 2 do
      if fields[j] == 'k' then key = fields[j + 1] end
    end
    if key then
      local value = redis.call('HGET', KEYS[4], key)
      local remove
      if not value then
        remove = true
      elseif string.sub(value, 1, 1) == 'd' then
        remove = offset < tonumber(string.sub(value, 2))
      else
        remove = tonumber(value) > offset
      end
      if remove then
        redis.call('XDEL', KEYS[2], id)
        deleted = deleted + 1
      end
    end
    from = offset + 1
  end
  if #entries >= max and from < limit then done = 0 else from = limit end
end

local dropped = 0
if done == 1 then
  local passed = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', limit, 'WITHSCORES', 'LIMIT', 0, max)
  for j = 1, #passed, 2 do
    local key = passed[j]
    local value = redis.call('HGET', KEYS[4], key)
    if value == 'd' .. passed[j + 1] then redis.call('HDEL', KEYS[4], key) end
    redis.call('ZREM', KEYS[5], key)
    dropped = dropped + 1
  end
  if ARGV[4] == '1' then redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. cutoff) end
end
return { from, done, deleted, dropped }
