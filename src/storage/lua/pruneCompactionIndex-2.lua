--[[
  Drops compaction index fields whose newest event retention already removed (cleanup_policy
  compact_and_delete), so the index does not keep keys that no longer occur in the partition.
  Atomic with publishing: a key re-published meanwhile points at an offset >= `oldest` and stays.

  KEYS[1] partition meta     (hash)   `oldest` = first retained offset
  KEYS[2] compaction index   (hash)   key -> newest offset or `d<offset>` (tombstones are left alone)

  ARGV[1 ..]                 candidate keys (seen by HSCAN with an offset below `oldest`)

  Returns the number of fields dropped (integer).
]]
local oldest = tonumber(redis.call('HGET', KEYS[1], 'oldest') or '0')
local dropped = 0
for i = 1, #ARGV do
  local value = redis.call('HGET', KEYS[2], ARGV[i])
  if value and string.sub(value, 1, 1) ~= 'd' and tonumber(value) < oldest then
    redis.call('HDEL', KEYS[2], ARGV[i])
    dropped = dropped + 1
  end
end
return dropped
