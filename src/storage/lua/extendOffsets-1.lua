--[[
  Gives partitions added by repartitioning a committed offset in a subscription that is already
  initialized, so they are read from their beginning (-1 = before the first event). A subscription
  never streamed nor reset is left alone (its lazy `read_from` decides later,
  docs/concepts.md "Subscriptions"); a partition that has an offset keeps it.

  KEYS[1] offsets  (hash) `<event type>:<partition>` -> last committed offset

  ARGV pairs: field, offset (integer; -1 = before the first event)

  Returns the number of partitions given an offset now (0 when the subscription is not initialized).
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local set = 0
for i = 1, #ARGV, 2 do
  set = set + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
end
return set
