--[[
  timeline_closed(meta): whether the partition's timeline was closed by a timeline switch (field
  `closed` in the partition meta hash: a newer timeline took over, issue 6 §3.2). An append to it
  answers TIMELINE_CLOSED (include `failures`) and the publisher retries on the new timeline.
]]
local function timeline_closed(meta)
  return redis.call('HEXISTS', meta, 'closed') == 1
end
