--[[
  Deletes a storage record unless it is the default storage (storages administration).

  KEYS[1] storages         (hash) storage id -> storage record (JSON)
  KEYS[2] default storage  (string) the default storage's id

  ARGV[1] storage id       (string)

  Returns 1 when deleted, 0 when no such storage exists, 2 when it is the default storage (kept).
]]
if redis.call('GET', KEYS[2]) == ARGV[1] then return 2 end
return redis.call('HDEL', KEYS[1], ARGV[1])
