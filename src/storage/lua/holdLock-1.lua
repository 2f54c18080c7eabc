--[[
  Takes a lock that is free, or renews it for its holder (compaction: one node per event type, so two nodes never
  compact the same partitions at once).

  KEYS[1] lock               (string with expiry) value = the holder's id

  ARGV[1] holder id          (string)
  ARGV[2] ttl                (milliseconds)

  Returns 1 when ARGV[1] holds the lock for ARGV[2] ms from now, LOCK_HELD when another holder has
  it (include `failures`).
]]
--#include failures
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder then return LOCK_HELD end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
