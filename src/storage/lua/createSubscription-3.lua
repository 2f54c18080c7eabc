--[[
  Registers a subscription unless one with the same key exists: then nothing is written and the
  existing id is returned (spec "Subscriptions": POST answers the existing subscription unchanged).

  KEYS[1] subscription keys (hash) subscription key JSON -> id
  KEYS[2] subscription ids  (sorted set) id, score = created_at in ms
  KEYS[3] subscription      (string) the record JSON

  ARGV[1] id (uuid)
  ARGV[2] subscription key JSON (owning_application, sorted event types, consumer_group)
  ARGV[3] record JSON
  ARGV[4] created_at in ms
  ARGV[5..] the per-event-type subscription sets (set) of the record's event types, one key each.
            The loader registers a fixed number of keys per script, so this list of variable length
            travels in ARGV; every entry is a key spelled by keys.ts (eventTypeSubscriptions) in the
            `{registry}` slot of KEYS[1..3], never built here.

  Returns the id stored under the key: ARGV[1] when created, the existing subscription's id otherwise.
]]
local existing = redis.call('HGET', KEYS[1], ARGV[2])
if existing then return existing end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SET', KEYS[3], ARGV[3])
for i = 5, #ARGV do
  redis.call('SADD', ARGV[i], ARGV[1])
end
return ARGV[1]
