--[[
  Registers an event type atomically: fails when the name is taken.

  KEYS[1] event type names (set)
  KEYS[2] event type       (hash) fields record (JSON), topology (JSON), revision (integer)
  KEYS[3] schema versions  (hash) version -> schema record (JSON)

  ARGV[1] name
  ARGV[2] record JSON
  ARGV[3] topology JSON
  ARGV[4] schema version
  ARGV[5] schema record JSON
  ARGV[6] timelines JSON (the first timeline and its storage)

  Returns 1 when created, ALREADY_EXISTS when the name is taken (include `failures`).
]]
--#include failures
if redis.call('EXISTS', KEYS[2]) == 1 then return ALREADY_EXISTS end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], 'record', ARGV[2], 'topology', ARGV[3], 'revision', 1, 'timelines', ARGV[6])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
return 1
