--[[
  Idempotent publishing (docs/publishing.md "Idempotent publishing"): an event whose `metadata.eid` was
  stored in the partition within the window is not stored again.

  Eids travel as one argument: the 16 bytes of each eid's uuid, concatenated in the events' order (one
  argument instead of one per event: cheaper to send, to parse and to keep). A partition remembers eids in
  two generations, sets of those 16-byte keys: the current one takes the eids stored now, the previous
  one holds those of the generation before. When the current generation is a window old (or holds
  `max_eids`), the previous one is dropped and the current one becomes the previous: an eid is remembered
  at least one window (unless `max_eids` starts generations sooner), and each generation holds at most
  `max_eids`. The partition meta hash records which key is current (`eid_gen`: `a` or `b`) and since when
  (`eid_since`, ms on Redis's clock). Sets keep the check and the insert O(1) per eid (a sorted set with
  expiry per eid cost more Redis CPU per event; a hash eid -> 1 a little more CPU and memory).

  idempotent_unpack(packed, count): the table of the `count` 16-byte keys of `packed`, or nil when its
    length is not 16 * count.
  idempotent_generations(meta, a, b, window_seconds, now): rotates as needed; returns current, previous.
  idempotent_keep(current, previous, eids, count): looks every key up in both generations (SMISMEMBER;
    the previous one only when it exists) and returns a table of `count` booleans, true for an event to
    store (its key is in neither, nor an earlier event's of this batch), and how many are true.
  idempotent_remember(meta, current, previous, window_seconds, max_eids, eids, keep, kept, now): adds the kept
    keys to the current generation, starts a new one when it reached `max_eids`, and lets both expire two
    windows after the last write, so an event type whose idempotency was turned off leaves nothing behind.
]]
-- Keys per SMISMEMBER or SADD call: `unpack` puts them all on Lua's stack at once.
local IDEMPOTENT_CHUNK = 4000

local function idempotent_unpack(packed, count)
  if #packed ~= 16 * count then return nil end
  local eids = {}
  for i = 1, count do eids[i] = string.sub(packed, 16 * i - 15, 16 * i) end
  return eids
end

local function idempotent_rotate(meta, current, previous, generation, now)
  redis.call('UNLINK', previous)
  redis.call('HSET', meta, 'eid_gen', generation, 'eid_since', now)
  return previous, current
end

local function idempotent_generations(meta, a, b, window_seconds, now)
  local state = redis.call('HMGET', meta, 'eid_gen', 'eid_since')
  local since = tonumber(state[2] or '')
  local current, previous, other = a, b, 'b'
  if state[1] == 'b' then current, previous, other = b, a, 'a' end
  local window_ms = window_seconds * 1000
  if since == nil then
    redis.call('HSET', meta, 'eid_gen', state[1] or 'a', 'eid_since', now)
  elseif now - since >= window_ms then
    current, previous = idempotent_rotate(meta, current, previous, other, now)
  end
  return current, previous
end

local function idempotent_keep(current, previous, eids, count)
  local keep = {}
  local kept = 0
  local seen = {}
  local has_previous = redis.call('EXISTS', previous) == 1
  for start = 1, count, IDEMPOTENT_CHUNK do
    local stop = math.min(start + IDEMPOTENT_CHUNK - 1, count)
    local in_current = redis.call('SMISMEMBER', current, unpack(eids, start, stop))
    local in_previous = has_previous and redis.call('SMISMEMBER', previous, unpack(eids, start, stop)) or {}
    for i = start, stop do
      local eid = eids[i]
      local j = i - start + 1
      local fresh = in_current[j] == 0 and in_previous[j] ~= 1 and not seen[eid]
      seen[eid] = true
      keep[i] = fresh
      if fresh then kept = kept + 1 end
    end
  end
  return keep, kept
end

local function idempotent_remember(meta, current, previous, window_seconds, max_eids, eids, keep, kept, now)
  local count = #eids
  if kept == count then
    -- Every event was new (the usual case): the keys go in as they are, without a copy.
    for start = 1, count, IDEMPOTENT_CHUNK do redis.call('SADD', current, unpack(eids, start, math.min(start + IDEMPOTENT_CHUNK - 1, count))) end
  else
    local args = {}
    for i, fresh in ipairs(keep) do
      if fresh then
        args[#args + 1] = eids[i]
        if #args >= IDEMPOTENT_CHUNK then
          redis.call('SADD', current, unpack(args))
          args = {}
        end
      end
    end
    if #args > 0 then redis.call('SADD', current, unpack(args)) end
  end
  local ttl = window_seconds * 2000
  if redis.call('SCARD', current) >= max_eids then
    local generation = redis.call('HGET', meta, 'eid_gen') == 'b' and 'a' or 'b'
    current, previous = idempotent_rotate(meta, current, previous, generation, now)
  end
  redis.call('PEXPIRE', current, ttl)
  redis.call('PEXPIRE', previous, ttl)
end
