--[[
  Charges one publish to the token buckets of the publishing quotas of its subject and of its event
  type's owning application, counted for the whole cluster (docs/publishing.md "Quotas"). Each bucket
  holds one second of its quota and refills at the quota's rate on Redis's clock (TIME), so every node
  counts against the same clock. A bucket may go below zero (debt): a publish is refused while a bucket
  it is charged to is at or below zero, and a publish that finds every bucket above zero is charged in
  full, whatever its size. A refused publish charges nothing.

  KEYS[1] the subject's bucket                (hash: e, b = events, bytes left; t = ms of the last charge)
  KEYS[2] the owning application's bucket     (hash, same fields)

  ARGV[1] events per second of KEYS[1]'s quota (integer; 0 = none: KEYS[1] is not touched)
  ARGV[2] bytes per second of KEYS[1]'s quota  (integer; 0 = none)
  ARGV[3] events per second of KEYS[2]'s quota (integer; 0 = none)
  ARGV[4] bytes per second of KEYS[2]'s quota  (integer; 0 = none)
  ARGV[5] events of the publish                (integer)
  ARGV[6] bytes of the publish                 (integer)

  Returns { charged, e1, b1, e2, b2 }: charged = 1 when the publish was charged, 0 when it was refused
  (nothing charged); e1, b1, e2, b2 the thousandths of events and bytes left in each bucket after this
  call (rounded down; may be negative; 0 for a quota that is not set).

  Memory: each bucket expires when it would be full again (a missing bucket reads as full), so a key
  lives only while its quota is used, at most one per quota set.
]]
--#include now-ms
local now = now_ms()
local events = tonumber(ARGV[5])
local bytes = tonumber(ARGV[6])

local buckets = {}
local refused = false
for i = 1, 2 do
  local rate_e = tonumber(ARGV[2 * i - 1])
  local rate_b = tonumber(ARGV[2 * i])
  local bucket = { key = KEYS[i], rate_e = rate_e, rate_b = rate_b, e = 0, b = 0, used = rate_e > 0 or rate_b > 0 }
  if bucket.used then
    local stored = redis.call('HMGET', KEYS[i], 'e', 'b', 't')
    local elapsed = stored[3] and math.max(0, now - tonumber(stored[3])) or 0
    bucket.e = math.min(rate_e, (tonumber(stored[1]) or rate_e) + elapsed * rate_e / 1000)
    bucket.b = math.min(rate_b, (tonumber(stored[2]) or rate_b) + elapsed * rate_b / 1000)
    if (rate_e > 0 and bucket.e <= 0) or (rate_b > 0 and bucket.b <= 0) then refused = true end
  end
  buckets[i] = bucket
end

if not refused then
  for i = 1, 2 do
    local bucket = buckets[i]
    if bucket.used then
      if bucket.rate_e > 0 then bucket.e = bucket.e - events end
      if bucket.rate_b > 0 then bucket.b = bucket.b - bytes end
      -- Full again after the longer of the two refills; a missing key reads as full.
      local full_ms = 1
      if bucket.rate_e > 0 then full_ms = math.max(full_ms, (bucket.rate_e - bucket.e) * 1000 / bucket.rate_e) end
      if bucket.rate_b > 0 then full_ms = math.max(full_ms, (bucket.rate_b - bucket.b) * 1000 / bucket.rate_b) end
      redis.call('HSET', bucket.key, 'e', tostring(bucket.e), 'b', tostring(bucket.b), 't', now)
      redis.call('PEXPIRE', bucket.key, math.ceil(full_ms))
    end
  end
end

local function milli(x) return math.floor(x * 1000) end
return { refused and 0 or 1, milli(buckets[1].e), milli(buckets[1].b), milli(buckets[2].e), milli(buckets[2].b) }
