--[[
  Applies a new partition assignment of a subscription and the session changes that caused it, if
  nobody changed the assignment since it was read (compare-and-set on its version, so two nodes rebalancing at
  once cannot both win; docs/architecture.md "Subscription sessions").

  KEYS[1] topology      (hash)   `version` (integer), `partitions` (JSON array of assignments); after the
                        subscription was deleted only `deleted` = 1, until it expires
  KEYS[2] sessions      (zset)   stream id → lease expiry, ms on Redis's clock
  KEYS[3] session info  (hash)   stream id → session JSON
  KEYS[4] reset         (string) present while a cursor reset runs
  KEYS[5] notices       (sharded pub/sub channel, same slot) receives `topology` on a change, so the
                        nodes streaming the subscription follow at once

  ARGV[1] expected version     (integer; 0 when the subscription never had an assignment)
  ARGV[2] partitions           (JSON array)
  ARGV[3] refuse during reset  ('1' = answer CURSOR_RESET_RUNNING when KEYS[4] exists)
  ARGV[4] removed stream ids   (space-separated; may be empty)
  ARGV[5] upserted stream id   ('' = none)
  ARGV[6] its session JSON
  ARGV[7] its lease            (ms from now)

  Returns 1 (applied), VERSION_MOVED (read again), CURSOR_RESET_RUNNING, or NOT_FOUND when the subscription
  was deleted (a session leaving late must not bring its state back) (include `failures`).
]]
--#include failures
--#include now-ms
if redis.call('HEXISTS', KEYS[1], 'deleted') == 1 then return NOT_FOUND end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return VERSION_MOVED end
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[4]) == 1 then return CURSOR_RESET_RUNNING end
for id in string.gmatch(ARGV[4], '%S+') do
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[2], now_ms() + tonumber(ARGV[7]), ARGV[5])
  redis.call('HSET', KEYS[3], ARGV[5], ARGV[6])
end
redis.call('HSET', KEYS[1], 'version', version + 1, 'partitions', ARGV[2])
redis.call('SPUBLISH', KEYS[5], 'topology')
return 1
