--[[
  Acknowledges batches of a queue-mode subscription, or hands them back (docs/consuming.md "Queue mode";
  docs/architecture.md#45-queue-mode-state; keys as in `claimQueueBatches`). The batch record fences: only the stream that holds
  a batch settles it, deadline passed or not, until another stream was handed it. An acknowledged batch
  is gone, and the partition's committed offset becomes the highest offset below which every batch is
  acknowledged; a handed-back batch waits to be handed out again at once. Nothing changes unless every
  cursor names a batch the stream holds or an offset already acknowledged.

  KEYS[1] queue      (hash)
  KEYS[2] open       (zset, lexical)
  KEYS[3] waiting    (zset, lexical)
  KEYS[4] deadlines  (zset)
  KEYS[5] offsets    (hash)
  KEYS[6] notices    (sharded pub/sub channel) receives `commit` when a committed offset moved, `queue`
                     when a batch was handed back, and `ack <stream id>` (the stream may take more)

  ARGV[1] stream id
  ARGV[2] `ack` or `release`
  ARGV[3..] pairs: field `<event type>:<partition>`, the batch's last offset

  Returns {r1, r2, ...} with ri = 1 settled, 0 already acknowledged (an offset handed out whose batch is
  open no more), or {BATCH_NOT_HELD, i} (include `failures`; i = 1-based index of the first cursor that
  names an open batch another stream holds or that waits to be handed out again, or an offset never handed
  out; every cursor of a hand-back must name a batch the stream holds).
]]
--#include failures
local me = ARGV[1]
local release = ARGV[2] == 'release'
local n = (#ARGV - 2) / 2
local function pad(x) return string.format('%016d', x) end

local records = {}
local results = {}
for i = 1, n do
  local field = ARGV[1 + 2 * i]
  local to = tonumber(ARGV[2 + 2 * i])
  local record = redis.call('HGET', KEYS[1], 'b:' .. field .. '|' .. to)
  local from, last, stream, _, deliveries
  if record then from, last, stream, _, deliveries = string.match(record, '^(%d+) (%d+) (%S+) (%d+) (%d+)$') end
  if record and stream == me then
    records[i] = {field, tonumber(from), to, deliveries}
    results[i] = 1
  elseif not record and not release and to <= tonumber(redis.call('HGET', KEYS[1], 'd:' .. field) or redis.call('HGET', KEYS[5], field) or '-1') then
    -- Handed out and acknowledged already (no batch of it is open): nothing to do, as for an old commit.
    results[i] = 0
  else
    return {BATCH_NOT_HELD, i}
  end
end

local touched = {}
local settled = 0
for i = 1, n do
  local r = records[i]
  if r then
    local field, from, to, deliveries = r[1], r[2], r[3], r[4]
    local key = field .. '|' .. to
    local member = field .. '|' .. pad(from) .. '|' .. to
    redis.call('ZREM', KEYS[4], key)
    settled = settled + (to - from + 1)
    if release then
      redis.call('HSET', KEYS[1], 'b:' .. key, from .. ' ' .. to .. ' - 0 ' .. deliveries)
      redis.call('ZADD', KEYS[3], 0, member)
    else
      redis.call('HDEL', KEYS[1], 'b:' .. key)
      redis.call('ZREM', KEYS[2], member)
      touched[field] = true
    end
    records[i] = nil
  end
end
if settled > 0 and redis.call('HINCRBY', KEYS[1], 'h:' .. me, -settled) <= 0 then redis.call('HDEL', KEYS[1], 'h:' .. me) end

local moved = false
for field in pairs(touched) do
  local first = redis.call('ZRANGE', KEYS[2], '[' .. field .. '|', '(' .. field .. '}', 'BYLEX', 'LIMIT', 0, 1)[1]
  local floor
  if first then
    floor = tonumber(string.match(first, '|(%d+)|%d+$')) - 1
  else
    floor = tonumber(redis.call('HGET', KEYS[1], 'd:' .. field) or '-1')
  end
  if floor > tonumber(redis.call('HGET', KEYS[5], field) or '-1') then
    redis.call('HSET', KEYS[5], field, floor)
    moved = true
  end
end
if moved then redis.call('SPUBLISH', KEYS[6], 'commit') end
if release then redis.call('SPUBLISH', KEYS[6], 'queue') end
if settled > 0 then redis.call('SPUBLISH', KEYS[6], 'ack ' .. me) end
return results
