--[[
  Grows an event type's partition count (repartitioning, `POST /event-types/{name}/partition-count`;
  docs/operations.md "Repartitioning"). The count only grows. Existing partitions keep their
  events and offsets; a new partition starts empty, opened by the caller on the active timeline after this
  (`PartitionLogs.openPartitions`: appends refuse a partition never opened).

  KEYS[1] event type (hash) record (JSON), topology (JSON {partitionCount, timeline}), revision

  ARGV[1] new partition count (integer >= 1)

  Returns {outcome, count before}: outcome 1 = grown, 0 = already that count (nothing changed),
  PARTITION_COUNT_SMALLER (refused, nothing changed) or NOT_FOUND (no such event type; include `failures`).
]]
--#include failures
local topologyJson = redis.call('HGET', KEYS[1], 'topology')
if not topologyJson then return {NOT_FOUND, 0} end
local topology = cjson.decode(topologyJson)
local current = tonumber(topology.partitionCount)
local wanted = tonumber(ARGV[1])
if wanted < current then return {PARTITION_COUNT_SMALLER, current} end
if wanted == current then return {0, current} end
topology.partitionCount = wanted
redis.call('HSET', KEYS[1], 'topology', cjson.encode(topology))
return {1, current}
