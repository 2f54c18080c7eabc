--[[
  Replaces an event type's timelines (a timeline switch or a clean-up) if nobody changed
  them since they were read, and makes `active` the active timeline in the topology.

  KEYS[1] event type (hash) record, topology (JSON {partitionCount, timeline}), revision, timelines (JSON array)

  ARGV[1] the timelines JSON as read ('' = the field was absent)
  ARGV[2] the new timelines JSON
  ARGV[3] the order of the active timeline afterwards (integer >= 1)
  ARGV[4] the partition count the new timelines were built for (a repartitioning meanwhile is a conflict)

  Returns 1 replaced, NOT_FOUND (no such event type) or VERSION_MOVED (the timelines or the partition
  count changed meanwhile; nothing changed) (include `failures`).
]]
--#include failures
local topologyJson = redis.call('HGET', KEYS[1], 'topology')
if not topologyJson then return NOT_FOUND end
local current = redis.call('HGET', KEYS[1], 'timelines') or ''
if current ~= ARGV[1] then return VERSION_MOVED end
local topology = cjson.decode(topologyJson)
if tonumber(topology.partitionCount) ~= tonumber(ARGV[4]) then return VERSION_MOVED end
topology.timeline = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'topology', cjson.encode(topology), 'timelines', ARGV[2])
return 1
