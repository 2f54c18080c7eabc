--[[
  Commits cursors of one stream, fenced against the current assignment (docs/architecture.md#43-subscription-sessions): the session
  must be alive (lease or commit window not expired) and hold every partition it commits (`session`
  of the partition's assignment, also while it is reassigning away). Cursors of one partition are
  compared in request order against the running maximum (docs/consuming.md "Commits").

  KEYS[1] offsets   (hash)  `<event type>:<partition>` → last committed offset
  KEYS[2] sessions  (zset)  stream id → expiry, ms on Redis's clock
  KEYS[3] topology  (hash)  `partitions` (JSON array of {eventType, partition, state, session, ...})
  KEYS[4] notices   (sharded pub/sub channel, same slot) receives `commit` when an offset moved, so the
                    nodes streaming the subscription see it at once, whichever node took the commit

  ARGV[1] stream id
  ARGV[2..] pairs: field `<event type>:<partition>`, offset (integer)

  Returns {r1, r2, ...} with ri = 1 committed / 0 outdated, {SESSION_GONE}, or {PARTITION_NOT_OWNED, i}
  (i = 1-based index of the first cursor of a partition the stream does not hold; include `failures`).
]]
--#include failures
--#include now-ms
local now = now_ms()
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) <= now then return {SESSION_GONE} end
local owners = {}
local partitions = cjson.decode(redis.call('HGET', KEYS[3], 'partitions') or '[]')
for _, a in ipairs(partitions) do
  if a.state ~= 'unassigned' then owners[a.eventType .. ':' .. a.partition] = a.session end
end
local n = (#ARGV - 1) / 2
for i = 1, n do
  if owners[ARGV[2 * i]] ~= ARGV[1] then return {PARTITION_NOT_OWNED, i} end
end
local results = {}
local any = false
for i = 1, n do
  local field = ARGV[2 * i]
  local offset = tonumber(ARGV[1 + 2 * i])
  local current = tonumber(redis.call('HGET', KEYS[1], field) or '-1')
  if offset > current then
    redis.call('HSET', KEYS[1], field, ARGV[1 + 2 * i])
    results[#results + 1] = 1
    any = true
  else
    results[#results + 1] = 0
  end
end
if any then redis.call('SPUBLISH', KEYS[4], 'commit') end
return results
