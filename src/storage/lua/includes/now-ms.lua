--[[
  now_ms(): Redis's clock in milliseconds (integer), from TIME (seconds, microseconds). Lease expiries
  are scored with it, so every node compares against the same clock.
]]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
