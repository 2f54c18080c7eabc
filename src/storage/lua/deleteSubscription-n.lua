--[[
  Removes a subscription from the registry. Its consumption state (offsets, sessions, topology; the
  `{sub:<id>}` slot) is removed afterwards by the store.

  KEYS[1] subscription keys (hash) subscription key JSON -> id
  KEYS[2] subscription ids  (sorted set)
  KEYS[3] subscription      (string) the record JSON
  KEYS[4..] per-event-type subscription sets (set), one per event type of the record

  ARGV[1] id (uuid)
  ARGV[2] subscription key JSON of the record (its key fields never change)

  Returns 1 when removed, NOT_FOUND when the subscription did not exist (include `failures`).
]]
--#include failures
if redis.call('EXISTS', KEYS[3]) == 0 then return NOT_FOUND end
if redis.call('HGET', KEYS[1], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[2]) end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
for i = 4, #KEYS do
  redis.call('SREM', KEYS[i], ARGV[1])
end
return 1
