--[[
  Makes an existing storage the default one (storages administration).

  KEYS[1] storages         (hash) storage id -> storage record (JSON)
  KEYS[2] default storage  (string) the default storage's id

  ARGV[1] storage id       (string)

  Returns 1 when it is the default now, 0 when no such storage exists (nothing changed).
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
return 1
