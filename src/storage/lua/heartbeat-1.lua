--[[
  Renews the lease of a streaming session (DESIGN.md §6). A session whose lease already expired, or
  that was removed (rebalanced away, reset, subscription deleted), is not renewed: its node must stop
  streaming. Also reports how many other sessions expired, so the caller can sweep them.

  KEYS[1] sessions  (zset) stream id → lease expiry, ms on Redis's clock

  ARGV[1] stream id
  ARGV[2] lease     (ms from now)

  Returns -1 when the session is gone or expired, else the number of expired sessions (integer).
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then return -1 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return redis.call('ZCOUNT', KEYS[1], '-inf', now)
