--[[
  Idempotent publishing (docs/publishing.md "Idempotent publishing"): an event whose `metadata.eid` was
  stored in the partition within the window is not stored again.

  idempotent_keep(index, window_seconds, max_eids, eids, from, count, now):
    index           (sorted set) member = eid, score = when it was stored (ms, Redis clock)
    window_seconds  how long a stored eid is remembered (integer 1..86400)
    max_eids        most eids remembered per partition: the oldest go first beyond it
    eids            ARGV, the eid of each event at ARGV[from .. from + count - 1], in event order
  Forgets eids older than the window, then looks every eid up at once (ZMSCORE). Returns a table of
  `count` booleans, true for an event to store (its eid was not stored within the window, and is not
  an earlier event's of this batch), and how many are true.

  idempotent_remember(index, window_seconds, max_eids, eids, from, keep, now): records the kept eids
  with score `now`, trims the index to `max_eids` and lets it expire a window after the last write, so
  an event type whose idempotency was turned off leaves nothing behind.
]]
local function idempotent_keep(index, window_seconds, max_eids, eids, from, count, now)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. (now - window_seconds * 1000))
  local keep = {}
  local kept = 0
  local seen = {}
  local chunk = 4000
  for start = 0, count - 1, chunk do
    local stop = math.min(start + chunk, count) - 1
    local args = {}
    for i = start, stop do args[#args + 1] = eids[from + i] end
    local scores = redis.call('ZMSCORE', index, unpack(args))
    for i = start, stop do
      local eid = eids[from + i]
      local fresh = (not scores[i - start + 1]) and (not seen[eid])
      seen[eid] = true
      keep[i + 1] = fresh
      if fresh then kept = kept + 1 end
    end
  end
  return keep, kept
end

local function idempotent_remember(index, window_seconds, max_eids, eids, from, keep, now)
  local args = {}
  for i, fresh in ipairs(keep) do
    if fresh then
      args[#args + 1] = now
      args[#args + 1] = eids[from + i - 1]
      if #args >= 6000 then
        redis.call('ZADD', index, unpack(args))
        args = {}
      end
    end
  end
  if #args > 0 then redis.call('ZADD', index, unpack(args)) end
  local size = redis.call('ZCARD', index)
  if size > max_eids then redis.call('ZREMRANGEBYRANK', index, 0, size - max_eids - 1) end
  redis.call('PEXPIRE', index, window_seconds * 1000)
end
