--[[
  publishBatch with idempotency (docs/publishing.md "Idempotent publishing"): appends the events of one
  batch that landed in one partition as ONE stream entry, leaving out every event whose eid the
  partition stored within the window (and a repeated eid within the batch), in order.

  KEYS[1] partition meta   (hash)   field `next` = next offset to assign, `oldest` = first retained offset
  KEYS[2] partition log    (stream) entry id `<next after this entry>-0`, fields n = event count, d = events
  KEYS[3] time index       (zset)   member = first offset received in a second, score = that unix second
  KEYS[4] notices          (sharded pub/sub channel) receives the new `next` offset so readers wake at once
  KEYS[5] eids, generation a (set)    16-byte eid keys (see include `idempotency`: which generation is current is in the meta hash)
  KEYS[6] eids, generation b (set)    16-byte eid keys

  ARGV[1] event count      (integer >= 1)
  ARGV[2] events           (bytes: the JSON texts joined by "\n"; JSON text never holds a raw newline)
  ARGV[3] timeline id      (uuid of the timeline the publisher appends to)
  ARGV[4] window           (seconds, 1..86400)
  ARGV[5] max eids         (most eids one generation takes before a new one starts)
  ARGV[6] eid keys         (bytes: the 16 bytes of each event's eid uuid, concatenated in the same order)

  Refusals as publishBatch's (include `append-refusal`). Returns the offset of the first stored event,
  or the partition's next offset when every event was stored before (integer >= 0), or TIMELINE_CLOSED
  or PARTITION_MISSING (include `failures`).
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
if #ARGV ~= 6 or not eids then return redis.error_reply('ERR publishIdempotent: ' .. count .. ' events need ' .. (16 * count) .. ' bytes of eid keys') end
local window = tonumber(ARGV[4])
local max_eids = tonumber(ARGV[5])
local now = now_ms()
local current, previous = idempotent_generations(KEYS[1], KEYS[5], KEYS[6], window, now)
local keep, kept = idempotent_select(current, previous, eids, count)
if kept == 0 then return tonumber(redis.call('HGET', KEYS[1], 'next') or '0') end
local data = ARGV[2]
if keep then
  local texts = {}
  local position = 1
  for i = 1, count do
    local newline = string.find(data, '\n', position, true)
    local stop = newline and newline - 1 or #data
    if keep[i] then texts[#texts + 1] = string.sub(data, position, stop) end
    position = stop + 2
  end
  data = table.concat(texts, '\n')
end
local next_offset = redis.call('HINCRBY', KEYS[1], 'next', kept)
local first = next_offset - kept
redis.call('XADD', KEYS[2], next_offset .. '-0', 'n', kept, 'd', data)
idempotent_settle(KEYS[1], current, previous, window, max_eids, now)
index_time(KEYS[3], first)
redis.call('SPUBLISH', KEYS[4], next_offset)
return first
