--[[
  Expected failures, answered as values so they are told apart from Redis errors: a script answers one of these negative integers, alone or as the
  first element of a table reply; a success is never a negative integer. `src/storage/script-failures.ts`
  holds the same numbers and maps each script's failures to the error catalog in one place; its unit
  test checks that the two lists agree.
]]
local NOT_FOUND = -1
local VERSION_MOVED = -2
local ALREADY_EXISTS = -3
local CURSOR_RESET_RUNNING = -4
local SESSION_GONE = -5
local PARTITION_NOT_OWNED = -6
local TIMELINE_CLOSED = -7
local PARTITION_COUNT_SMALLER = -8
local LOCK_HELD = -9
local PARTITION_MISSING = -10
local BATCH_NOT_HELD = -11
