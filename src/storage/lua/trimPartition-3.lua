--[[
  Retention: removes every entry whose events were all received before a cut-off second, using the
  time index to find the cut point, and records the new oldest offset
  (docs/concepts.md "Retention and compaction").

  KEYS[1] partition meta   (hash)   `next`, `oldest`
  KEYS[2] partition log    (stream)
  KEYS[3] time index       (zset)   member = first offset received in a second, score = unix second

  ARGV[1] cut-off          (unix seconds; events received in an earlier second are removed)

  Returns the new oldest offset (integer).
]]
local cutoff = tonumber(ARGV[1])
local next_offset = tonumber(redis.call('HGET', KEYS[1], 'next') or '0')
local oldest = tonumber(redis.call('HGET', KEYS[1], 'oldest') or '0')
local keep = redis.call('ZRANGEBYSCORE', KEYS[3], cutoff, '+inf', 'LIMIT', 0, 1)
local first_kept = next_offset
if #keep > 0 then first_kept = tonumber(keep[1]) end
if first_kept <= oldest then return oldest end
-- Entry ids are `<offset after the entry>-0`: entries ending at or before first_kept go.
redis.call('XTRIM', KEYS[2], 'MINID', (first_kept + 1) .. '-0')
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. cutoff)
redis.call('HSET', KEYS[1], 'oldest', first_kept)
return first_kept
