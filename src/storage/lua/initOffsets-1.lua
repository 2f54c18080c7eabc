--[[
  Initializes the committed offsets of partitions that have none yet (lazy `read_from`,
  docs/concepts.md "Subscriptions"): a partition already initialized, by this node or a racing one,
  keeps its offset.

  KEYS[1] offsets  (hash) `<event type>:<partition>` → last committed offset

  ARGV pairs: field, offset (integer; -1 = before the first event)

  Returns the number of partitions initialized now (integer).
]]
local set = 0
for i = 1, #ARGV, 2 do
  set = set + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
end
return set
