--[[
  Appends the events of one batch that landed in one partition as ONE stream entry, assigning them
  the next dense offsets, so Redis work grows with batches, not events (docs/decisions/0001-one-stream-entry-per-partition-per-batch.md).

  KEYS[1] partition meta   (hash)   field `next` = next offset to assign, `oldest` = first retained offset
  KEYS[2] partition log    (stream) entry id `<next after this entry>-0`, fields n = event count, then
                                    d = events, or z = one zstd frame of them (src/domain/batch/entry-codec.ts)
  KEYS[3] time index       (zset)   member = first offset received in a second, score = that unix second
  KEYS[4] notices          (sharded pub/sub channel) receives the new `next` offset so readers wake at once

  ARGV[1] event count      (integer >= 1)
  ARGV[2] events           (bytes: the JSON texts joined by "\n", or one zstd frame of them when ARGV[4] is `z`)
  ARGV[3] timeline id      (uuid of the timeline the publisher appends to; absent from nodes that predate it)
  ARGV[4] format           (optional: `z` = ARGV[2] is compressed and goes to field z; absent = field d)

  A partition whose timeline was closed (a newer timeline took over) refuses the append
  with TIMELINE_CLOSED, one never opened (its event type was deleted) or opened for another timeline id
  (the name was deleted and created again) with PARTITION_MISSING: include `append-refusal`.

  Returns the offset of the first event of the entry (integer >= 0), or TIMELINE_CLOSED or PARTITION_MISSING (include `failures`).
]]
--#include failures
--#include append-refusal
--#include time-index
local refusal = append_refusal(KEYS[1], ARGV[3])
if refusal then return refusal end
local count = tonumber(ARGV[1])
local next_offset = redis.call('HINCRBY', KEYS[1], 'next', count)
local first = next_offset - count
local field = 'd'
if ARGV[4] == 'z' then field = 'z' end
redis.call('XADD', KEYS[2], next_offset .. '-0', 'n', count, field, ARGV[2])
index_time(KEYS[3], first)
redis.call('SPUBLISH', KEYS[4], next_offset)
return first
