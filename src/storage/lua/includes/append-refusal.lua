--[[
  append_refusal(meta, timeline_id): the failure an append for timeline `timeline_id` (a uuid; nil from a
  node that predates timeline ids) to the partition with meta hash `meta` answers, or false when it may
  append (include `failures`):
  - TIMELINE_CLOSED: a timeline switch closed it (field `closed`: a newer timeline took over); the
    publisher retries on the new timeline.
  - PARTITION_MISSING: it was never opened (no field `next`; a partition is opened when its timeline
    is created or the partition count grows). Its event type was deleted and the publishing node still
    held a copy: appending would create keys no event type owns, so the publisher reads the event type
    again and answers 404 (or, for a partition of an event type created before partitions were opened,
    opens it and appends).
  - PARTITION_MISSING as well when it was opened for another timeline (field `timeline`, the id recorded
    when it was opened): the event type was deleted and created again under the same name, whose first
    timeline has the same partition keys, and the publishing node still held the deleted one. A meta
    without the field (opened before timeline ids were recorded) or an append without an id is not
    checked.
]]
local function append_refusal(meta, timeline_id)
  local state = redis.call('HMGET', meta, 'closed', 'next', 'timeline')
  if state[1] then return TIMELINE_CLOSED end
  if not state[2] then return PARTITION_MISSING end
  if timeline_id and state[3] and state[3] ~= timeline_id then return PARTITION_MISSING end
  return false
end
