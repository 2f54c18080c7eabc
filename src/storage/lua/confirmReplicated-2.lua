--[[
  Moves a partition's high watermark: its `replicated` offset, one past the newest event the replicas are
  known to hold, where readers stop when reads wait for replicas (docs/operations.md "Durability";
  src/domain/cursor/high-watermark.ts). Called on a master after a `WAIT` there confirmed the writes up to
  ARGV[1]; and, with ARGV[1] = 0, to start a confirmation of what the partition holds (see below).

  KEYS[1] partition meta   (hash)   fields `next` (next offset to assign) and `replicated` (this script's)
  KEYS[2] replicated notices (sharded pub/sub channel) receives the new `replicated` so waiting readers wake

  ARGV[1] confirmed next   (integer >= 0): a `WAIT` confirmed every write up to the one that made the
                           partition's `next` this value (0: nothing confirmed by this call)

  The field only moves up, and never past `next` (a value from another master's history cannot reach
  beyond what this one holds). It is written on every call, moved or not: so the calling connection's
  next `WAIT` covers everything this master wrote before the call, and the reply (`next` as the call saw
  it) is what that `WAIT` confirms — a later call with that value moves the watermark over it.

  Returns the partition's `next` (integer >= 0), or PARTITION_MISSING when it has none (never opened,
  or its event type was deleted: nothing is written, so no key is made again).
]]
--#include failures
local next_offset = tonumber(redis.call('HGET', KEYS[1], 'next'))
if not next_offset then return PARTITION_MISSING end
local current = tonumber(redis.call('HGET', KEYS[1], 'replicated') or '0')
local target = math.min(tonumber(ARGV[1]), next_offset)
if target > current then
  redis.call('HSET', KEYS[1], 'replicated', target)
  redis.call('SPUBLISH', KEYS[2], target)
else
  redis.call('HSET', KEYS[1], 'replicated', current)
end
return next_offset
