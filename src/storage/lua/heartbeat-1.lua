--[[
  Renews the lease of a streaming session (docs/architecture.md "Subscription sessions"). A session
  whose lease already expired, or that was removed (rebalanced away, reset, subscription deleted), is not
  renewed: its node must stop streaming. Also reports how many other sessions expired, so the caller can
  sweep them.

  KEYS[1] sessions  (zset) stream id → lease expiry, ms on Redis's clock

  ARGV[1] stream id
  ARGV[2] lease     (ms from now)

  Returns SESSION_GONE (include `failures`) when the session is gone or expired, else the number of
  expired sessions (integer >= 0).
]]
--#include failures
--#include now-ms
local now = now_ms()
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then return SESSION_GONE end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return redis.call('ZCOUNT', KEYS[1], '-inf', now)
