--[[
  append_refusal(meta): the failure an append to the partition with meta hash `meta` answers, or false
  when it may append (include `failures`):
  - TIMELINE_CLOSED: a timeline switch closed it (field `closed`: a newer timeline took over, issue 6
    §3.2); the publisher retries on the new timeline.
  - PARTITION_MISSING: it was never opened (no field `next`; a partition is opened when its timeline
    is created or the partition count grows). Its event type was deleted and the publishing node still
    held a copy: appending would create keys no event type owns, so the publisher reads the event type
    again and answers 404 (or, for a partition of an event type created before partitions were opened,
    opens it and appends).
]]
local function append_refusal(meta)
  local state = redis.call('HMGET', meta, 'closed', 'next')
  if state[1] then return TIMELINE_CLOSED end
  if not state[2] then return PARTITION_MISSING end
  return false
end
