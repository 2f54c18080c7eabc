--[[
  Hands batches of a queue-mode subscription to one stream (docs/consuming.md "Queue mode";
  docs/architecture.md#45-queue-mode-state). A batch is a range of offsets of one partition, held by one
  stream until it is acknowledged (`settleQueueBatches`), handed back, or its deadline passes; then it
  waits to be handed out again, before any new offset. First releases batches whose deadline passed
  (at most 100 per call), then takes waiting batches (lowest first), then new offsets from the
  partitions, round robin from `rotate`.

  KEYS[1] queue      (hash)  `d:<field>` last offset handed out at least once (absent: the committed
                             offset); `b:<field>|<to>` a batch: "<from> <to> <stream or -> <deadline ms>
                             <deliveries>"; `h:<stream>` events the stream holds (absent: none)
  KEYS[2] open       (zset, lexical) every batch not acknowledged: `<field>|<from, 16 digits>|<to>`
  KEYS[3] waiting    (zset, lexical) batches waiting to be handed out again, same members
  KEYS[4] deadlines  (zset) `<field>|<to>` → deadline, ms on Redis's clock, of each held batch
  KEYS[5] offsets    (hash)  `<field>` → committed offset (the acknowledged floor)
  KEYS[6] sessions   (zset)  stream id → lease expiry, ms on Redis's clock
  KEYS[7] notices    (sharded pub/sub channel) receives `queue` when released batches wait

  ARGV[1] stream id
  ARGV[2] commit timeout, ms (a batch's deadline after it is handed out)
  ARGV[3] events the stream may hold at most (`max_uncommitted_events`, less what `stream_limit` leaves)
  ARGV[4] events per batch at most (`batch_limit`)
  ARGV[5] batches to hand out at most
  ARGV[6] deliveries after which a batch's event is dead-lettered (0: never)
  ARGV[7] 1: a batch handed out before is handed out again one event at a time (a dead-letter policy counts
          deliveries per event)
  ARGV[8] the index of the partition to look at first for new offsets (round robin, from 0)
  ARGV[9..] pairs: field `<event type>:<partition>`, newest offset the caller knows of

  Returns {SESSION_GONE} (include `failures`) when the stream's session is gone or expired, else
  {timed out (1 when a batch of this stream passed its deadline), events the stream holds, ms until the
  earliest deadline of any held batch (-1: none), then per batch: field, from, to, deliveries, 1 when its
  event is due for the dead-letter policy else 0}.
]]
--#include failures
--#include now-ms
local now = now_ms()
local me = ARGV[1]
local expiry = redis.call('ZSCORE', KEYS[6], me)
if not expiry or tonumber(expiry) <= now then return {SESSION_GONE} end

local function pad(n) return string.format('%016d', n) end
local function parse(record)
  local from, to, stream, deadline, deliveries = string.match(record, '^(%d+) (%d+) (%S+) (%d+) (%d+)$')
  return tonumber(from), tonumber(to), stream, tonumber(deadline), tonumber(deliveries)
end

-- Batches past their deadline wait to be handed out again.
local timedOut = 0
local released = 0
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 100)) do
  local record = redis.call('HGET', KEYS[1], 'b:' .. key)
  redis.call('ZREM', KEYS[4], key)
  if record then
    local from, to, stream, _, deliveries = parse(record)
    if stream == me then timedOut = 1 end
    if stream ~= '-' and redis.call('HINCRBY', KEYS[1], 'h:' .. stream, from - to - 1) <= 0 then redis.call('HDEL', KEYS[1], 'h:' .. stream) end
    redis.call('HSET', KEYS[1], 'b:' .. key, from .. ' ' .. to .. ' - 0 ' .. deliveries)
    local field = string.match(key, '^(.*)|%d+$')
    redis.call('ZADD', KEYS[3], 0, field .. '|' .. pad(from) .. '|' .. to)
    released = released + 1
  end
end

local held = tonumber(redis.call('HGET', KEYS[1], 'h:' .. me) or '0')
-- A stream whose batch timed out ends: it takes nothing more.
if timedOut == 1 then
  if released > 0 then redis.call('SPUBLISH', KEYS[7], 'queue') end
  return {1, held, -1}
end
local room = tonumber(ARGV[3]) - held
local batchLimit = tonumber(ARGV[4])
local maxBatches = tonumber(ARGV[5])
local deliveryLimit = tonumber(ARGV[6])
local isolate = ARGV[7] == '1'
local deadline = now + tonumber(ARGV[2])
local out = {timedOut, 0, -1}
local handed = 0

local function hold(field, from, to, deliveries, dead)
  redis.call('HSET', KEYS[1], 'b:' .. field .. '|' .. to, from .. ' ' .. to .. ' ' .. me .. ' ' .. deadline .. ' ' .. deliveries)
  redis.call('ZADD', KEYS[4], deadline, field .. '|' .. to)
  local n = to - from + 1
  held = held + n
  room = room - n
  handed = handed + 1
  out[#out + 1] = field
  out[#out + 1] = from
  out[#out + 1] = to
  out[#out + 1] = deliveries
  out[#out + 1] = dead
end

-- Waiting batches first, lowest member first.
while handed < maxBatches and room > 0 do
  local member = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not member then break end
  local field, from, to = string.match(member, '^(.*)|(%d+)|(%d+)$')
  from = tonumber(from)
  to = tonumber(to)
  local key = field .. '|' .. to
  local record = redis.call('HGET', KEYS[1], 'b:' .. key)
  if not record then
    redis.call('ZREM', KEYS[3], member)
  else
  local _, _, _, _, deliveries = parse(record)
  local dead = 0
  if deliveryLimit > 0 and deliveries >= deliveryLimit then dead = 1 end
  local n = math.min(to - from + 1, batchLimit, room)
  if isolate or dead == 1 then n = 1 end
  redis.call('ZREM', KEYS[3], member)
  local last = from + n - 1
  if last < to then
    -- The rest waits on, as its own batch with the same deliveries.
    redis.call('ZREM', KEYS[2], member)
    redis.call('ZADD', KEYS[2], 0, field .. '|' .. pad(from) .. '|' .. last)
    local rest = field .. '|' .. pad(last + 1) .. '|' .. to
    redis.call('ZADD', KEYS[2], 0, rest)
    redis.call('ZADD', KEYS[3], 0, rest)
    redis.call('HSET', KEYS[1], 'b:' .. key, (last + 1) .. ' ' .. to .. ' - 0 ' .. deliveries)
  else
    redis.call('HDEL', KEYS[1], 'b:' .. key)
  end
  if dead == 1 then hold(field, from, last, deliveries, 1) else hold(field, from, last, deliveries + 1, 0) end
  end
end

-- Then new offsets, round robin over the partitions.
local pairsCount = (#ARGV - 8) / 2
local start = tonumber(ARGV[8]) % math.max(pairsCount, 1)
for step = 0, pairsCount - 1 do
  if handed >= maxBatches or room <= 0 then break end
  local i = (start + step) % pairsCount
  local field = ARGV[9 + 2 * i]
  local newest = tonumber(ARGV[10 + 2 * i])
  local dispatched = tonumber(redis.call('HGET', KEYS[1], 'd:' .. field) or redis.call('HGET', KEYS[5], field) or '-1')
  while handed < maxBatches and room > 0 and newest > dispatched do
    local from = dispatched + 1
    local to = math.min(newest, dispatched + batchLimit, dispatched + room)
    redis.call('ZADD', KEYS[2], 0, field .. '|' .. pad(from) .. '|' .. to)
    dispatched = to
    redis.call('HSET', KEYS[1], 'd:' .. field, dispatched)
    hold(field, from, to, 1, 0)
  end
end

-- A stream holding nothing has no field (so the fields of ended streams go once their batches do).
if held > 0 then redis.call('HSET', KEYS[1], 'h:' .. me, held) else redis.call('HDEL', KEYS[1], 'h:' .. me) end
out[2] = held
-- How long until the earliest deadline of a held batch: a stream that found nothing claims again then.
local earliest = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')[2]
if earliest then out[3] = math.max(0, tonumber(earliest) - now) end
if released > 0 and redis.call('ZCARD', KEYS[3]) > 0 then redis.call('SPUBLISH', KEYS[7], 'queue') end
return out
