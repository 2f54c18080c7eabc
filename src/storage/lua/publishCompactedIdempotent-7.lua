--[[
  publishCompacted with idempotency (docs/publishing.md "Idempotent publishing"): appends the events of
  one batch that landed in one partition of a compacted event type, one stream entry per event, leaving
  out every event whose eid the partition stored within the window (and a repeated eid within the batch).

  KEYS[1] partition meta     (hash)   field `next` = next offset to assign, `oldest` = first retained offset
  KEYS[2] partition log      (stream) entry id `<offset + 1>-0`, fields n = 1, d = the event, k = its compaction key
  KEYS[3] time index         (zset)   member = first offset received in a second, score = that unix second
  KEYS[4] notices            (sharded pub/sub channel) receives the new `next` offset so readers wake at once
  KEYS[5] compaction index   (hash)   compaction key -> offset of its newest event
  KEYS[6] eids, generation a (set)    16-byte eid keys (see include `idempotency`)
  KEYS[7] eids, generation b (set)    16-byte eid keys

  ARGV[1] event count        (integer >= 1)
  ARGV[2] events             (bytes: the JSON texts joined by "\n")
  ARGV[3] timeline id        (uuid of the timeline the publisher appends to)
  ARGV[4] window             (seconds, 1..86400)
  ARGV[5] max eids           (most eids one generation takes before a new one starts)
  ARGV[6] eid keys           (bytes: the 16 bytes of each event's eid uuid, concatenated in the same order)
  ARGV[7 .. 6 + count]       compaction key of each event, in the same order

  Refusals as publishCompacted's (include `append-refusal`). Returns the offset of the first stored
  event, or the partition's next offset when every event was stored before, or TIMELINE_CLOSED or
  PARTITION_MISSING (include `failures`).
]]
--#include failures
--#include append-refusal
--#include time-index
--#include now-ms
--#include idempotency
local refusal = append_refusal(KEYS[1], ARGV[3])
if refusal then return refusal end
local count = tonumber(ARGV[1])
local eids = idempotent_unpack(ARGV[6] or '', count)
if #ARGV ~= count + 6 or not eids then return redis.error_reply('ERR publishCompactedIdempotent: ' .. count .. ' events need ' .. (16 * count) .. ' bytes of eid keys and ' .. count .. ' compaction keys') end
local window = tonumber(ARGV[4])
local max_eids = tonumber(ARGV[5])
local now = now_ms()
local current, previous = idempotent_generations(KEYS[1], KEYS[6], KEYS[7], window, now)
local keep, kept = idempotent_select(current, previous, eids, count)
if kept == 0 then return tonumber(redis.call('HGET', KEYS[1], 'next') or '0') end
local data = ARGV[2]
local next_offset = redis.call('HINCRBY', KEYS[1], 'next', kept)
local first = next_offset - kept
local offset = first
local position = 1
for i = 1, count do
  local newline = string.find(data, '\n', position, true)
  local stop = newline and newline - 1 or #data
  if not keep or keep[i] then
    local key = ARGV[6 + i]
    redis.call('XADD', KEYS[2], (offset + 1) .. '-0', 'n', 1, 'd', string.sub(data, position, stop), 'k', key)
    redis.call('HSET', KEYS[5], key, offset)
    offset = offset + 1
  end
  position = stop + 2
end
idempotent_settle(KEYS[1], current, previous, window, max_eids, now)
index_time(KEYS[3], first)
redis.call('SPUBLISH', KEYS[4], next_offset)
return first
