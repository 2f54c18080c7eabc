--[[
  Replaces an event type's record if nobody changed it meanwhile (compare-and-set on `revision`),
  adding a schema version when the schema changed.

  KEYS[1] event type       (hash) record, topology, revision
  KEYS[2] schema versions  (hash) version -> schema record (JSON)

  ARGV[1] expected revision (integer)
  ARGV[2] record JSON
  ARGV[3] schema version, or '' when the schema did not change
  ARGV[4] schema record JSON, or ''

  Returns 1 when updated, NOT_FOUND when the event type is gone, VERSION_MOVED when the revision moved
  on (include `failures`).
]]
--#include failures
local revision = redis.call('HGET', KEYS[1], 'revision')
if not revision then return NOT_FOUND end
if revision ~= ARGV[1] then return VERSION_MOVED end
redis.call('HSET', KEYS[1], 'record', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'revision', 1)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[4]) end
return 1
