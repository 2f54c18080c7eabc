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
  idempotent_select(current, previous, eids, count): looks every key up in both generations (SMISMEMBER;
    the previous one only when it exists), adds the new ones to the current generation (SADD) and returns
    which events to store — nil when all of them (the usual case), else a table of `count` booleans, true
    for an event whose key is in neither generation nor an earlier event's of this batch — and how many.
    The keys go in before the events are appended: nothing between can fail (the script checked its
    arguments and the partition first), and adding first lets SADD's count tell whether the batch repeats
    an eid, so the usual batch needs no table of the keys it has seen.
  idempotent_settle(meta, current, previous, window_seconds, max_eids, now): starts a new generation when
    the current one reached `max_eids`, and lets both expire two windows after the last write, so an event
    type whose idempotency was turned off leaves nothing behind.
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

-- Which events of the batch are new, from the SMISMEMBER replies: nil while every one is, else a table
-- of booleans (created at the first event found in a generation). Returns that and how many are new.
local function idempotent_lookup(current, previous, eids, count)
  local keep = nil
  local kept = count
  local has_previous = redis.call('EXISTS', previous) == 1
  for start = 1, count, IDEMPOTENT_CHUNK do
    local stop = math.min(start + IDEMPOTENT_CHUNK - 1, count)
    local in_current = redis.call('SMISMEMBER', current, unpack(eids, start, stop))
    local in_previous = has_previous and redis.call('SMISMEMBER', previous, unpack(eids, start, stop)) or nil
    for i = start, stop do
      local j = i - start + 1
      if in_current[j] == 1 or (in_previous and in_previous[j] == 1) then
        if not keep then
          keep = {}
          for k = 1, i - 1 do keep[k] = true end
        end
        keep[i] = false
        kept = kept - 1
      elseif keep then
        keep[i] = true
      end
    end
  end
  return keep, kept
end

-- Adds the keys of the events `keep` selects (all when nil) to the current generation; returns how many
-- were not in it yet (fewer than selected when the batch repeats an eid).
local function idempotent_add(current, eids, keep)
  local count = #eids
  local added = 0
  if not keep then
    for start = 1, count, IDEMPOTENT_CHUNK do added = added + redis.call('SADD', current, unpack(eids, start, math.min(start + IDEMPOTENT_CHUNK - 1, count))) end
    return added
  end
  local args = {}
  for i = 1, count do
    if keep[i] then
      args[#args + 1] = eids[i]
      if #args >= IDEMPOTENT_CHUNK then
        added = added + redis.call('SADD', current, unpack(args))
        args = {}
      end
    end
  end
  if #args > 0 then added = added + redis.call('SADD', current, unpack(args)) end
  return added
end

local function idempotent_select(current, previous, eids, count)
  local keep, kept = idempotent_lookup(current, previous, eids, count)
  if kept == 0 or idempotent_add(current, eids, keep) == kept then return keep, kept end
  -- The batch repeats an eid: only its first event is new.
  local first_only = {}
  local seen = {}
  kept = 0
  for i = 1, count do
    local eid = eids[i]
    local fresh = (not keep or keep[i]) and not seen[eid]
    seen[eid] = true
    first_only[i] = fresh
    if fresh then kept = kept + 1 end
  end
  return first_only, kept
end

local function idempotent_settle(meta, current, previous, window_seconds, max_eids, now)
  local ttl = window_seconds * 2000
  if redis.call('SCARD', current) >= max_eids then
    local generation = redis.call('HGET', meta, 'eid_gen') == 'b' and 'a' or 'b'
    current, previous = idempotent_rotate(meta, current, previous, generation, now)
  end
  redis.call('PEXPIRE', current, ttl)
  redis.call('PEXPIRE', previous, ttl)
end
