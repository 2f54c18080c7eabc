--[[
  Appends the events of one batch that landed in one partition of a compacted event type
  (cleanup_policy compact / compact_and_delete): ONE stream entry PER EVENT, so compaction can
  remove a superseded event on its own, and the compaction index points each key at its newest event.
  Offsets are the same dense offsets as publishBatch's.

  KEYS[1] partition meta     (hash)   field `next` = next offset to assign, `oldest` = first retained offset
  KEYS[2] partition log      (stream) entry id `<offset + 1>-0`, fields n = 1, d = the event, k = its compaction key
  KEYS[3] time index         (zset)   member = first offset received in a second, score = that unix second
  KEYS[4] notices            (sharded pub/sub channel) receives the new `next` offset so readers wake at once
  KEYS[5] compaction index   (hash)   compaction key -> offset of its newest event

  ARGV[1] event count        (integer >= 1)
  ARGV[2] events             (bytes: the JSON texts joined by "\n"; JSON text never holds a raw newline)
  ARGV[3] timeline id        (uuid of the timeline the publisher appends to)
  ARGV[4 .. 3 + count]       compaction key of each event, in the same order

  A partition whose timeline was closed (a newer timeline took over) refuses the append
  with TIMELINE_CLOSED, one never opened (its event type was deleted) or opened for another timeline id
  (the name was deleted and created again) with PARTITION_MISSING: include `append-refusal`.

  Returns the offset of the first event (integer >= 0), or TIMELINE_CLOSED or PARTITION_MISSING (include `failures`).
]]
--#include failures
--#include append-refusal
--#include time-index
local refusal = append_refusal(KEYS[1], ARGV[3])
if refusal then return refusal end
local count = tonumber(ARGV[1])
if #ARGV ~= count + 3 then return redis.error_reply('ERR publishCompacted: ' .. count .. ' events need a timeline id and ' .. count .. ' compaction keys') end
local data = ARGV[2]
local next_offset = redis.call('HINCRBY', KEYS[1], 'next', count)
local first = next_offset - count
local position = 1
for i = 0, count - 1 do
  local newline = string.find(data, '\n', position, true)
  local text
  if newline then
    text = string.sub(data, position, newline - 1)
    position = newline + 1
  else
    text = string.sub(data, position)
    position = #data + 1
  end
  local offset = first + i
  local key = ARGV[4 + i]
  redis.call('XADD', KEYS[2], (offset + 1) .. '-0', 'n', 1, 'd', text, 'k', key)
  redis.call('HSET', KEYS[5], key, offset)
end
index_time(KEYS[3], first)
redis.call('SPUBLISH', KEYS[4], next_offset)
return first
