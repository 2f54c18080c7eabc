--[[
  `POST /event-types/{name}/deleted-events` for one partition of a compacted event type:
  a tombstone per compaction key. Every event of that key already in the partition (offset below the
  partition's `next`) is removed by the next compaction round; the tombstone itself occupies no offset
  and is never delivered. Events of the key published afterwards replace the tombstone as usual.

  KEYS[1] partition meta     (hash)   field `next` = next offset to assign
  KEYS[2] compaction index   (hash)   compaction key -> newest offset, or `d<offset>` = deleted before <offset>
  KEYS[3] tombstones         (zset)   member = compaction key, score = the <offset> of its tombstone

  ARGV[1 ..]                 compaction keys (at least one)

  Returns the tombstone offset (integer): events of these keys before it are removed at compaction.
]]
local next_offset = tonumber(redis.call('HGET', KEYS[1], 'next') or '0')
for i = 1, #ARGV do
  redis.call('HSET', KEYS[2], ARGV[i], 'd' .. next_offset)
  redis.call('ZADD', KEYS[3], next_offset, ARGV[i])
end
return next_offset
