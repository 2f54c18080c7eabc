--[[
  index_time(time_index, first): records in the time index (zset: member = first offset received in a
  second, score = that unix second, Redis's clock) that offset `first` was received now, unless an
  offset already holds the current second. Retention and compaction find their cut points with it.
]]
local function index_time(time_index, first)
  local now = tonumber(redis.call('TIME')[1])
  local last = redis.call('ZREVRANGE', time_index, 0, 0, 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) < now then
    redis.call('ZADD', time_index, now, first)
  end
end
