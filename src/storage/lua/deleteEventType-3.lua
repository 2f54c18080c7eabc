--[[
  Removes an event type's metadata. Its partition logs (other slots) are removed afterwards, one
  partition at a time, by the registry.

  KEYS[1] event type names (set)
  KEYS[2] event type       (hash)
  KEYS[3] schema versions  (hash)

  ARGV[1] name

  Returns {topology JSON, timelines JSON or ''} of the removed event type, or NOT_FOUND (include `failures`).
]]
--#include failures
local topology = redis.call('HGET', KEYS[2], 'topology')
if not topology then return NOT_FOUND end
local timelines = redis.call('HGET', KEYS[2], 'timelines') or ''
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2], KEYS[3])
return {topology, timelines}
