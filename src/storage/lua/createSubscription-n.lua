--[[
  Registers a subscription unless one with the same key exists: then nothing is written and the
  existing id is returned (POST answers the existing subscription unchanged;
  docs/concepts.md "Subscriptions").

  KEYS[1] subscription keys (hash) subscription key JSON -> id
  KEYS[2] subscription ids  (sorted set) id, score = created_at in ms
  KEYS[3] subscription      (string) the record JSON
  KEYS[4..] per-event-type subscription sets (set), one per event type of the record: id members

  ARGV[1] id (uuid)
  ARGV[2] subscription key JSON (owning_application, sorted event types, consumer_group)
  ARGV[3] record JSON
  ARGV[4] created_at in ms

  Returns the id stored under the key: ARGV[1] when created, the existing subscription's id otherwise.
]]
local existing = redis.call('HGET', KEYS[1], ARGV[2])
if existing then return existing end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SET', KEYS[3], ARGV[3])
for i = 4, #KEYS do
  redis.call('SADD', KEYS[i], ARGV[1])
end
return ARGV[1]
