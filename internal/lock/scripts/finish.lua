-- finish.lua: record the run's end in the ledger and release the lock (compare-and-delete),
-- one round trip.
--
-- KEYS[1]  lockedcron:{<key>}:lock
-- KEYS[2]  lockedcron:{<key>}:run:<unix secs>
-- ARGV[1]  our lock value, "<token> <holder>"
-- ARGV[2]  our token
-- ARGV[3]  final ledger state: "succeeded" | "failed" | "" (release only: forget our
--          running entry, as if we never ran)
-- ARGV[4]  ledger retention in milliseconds
-- ARGV[5]  finish time, unix milliseconds (informational)
--
-- Returns {released, recorded}: 1 when the lock was ours and is now deleted, 1 when the
-- ledger entry was ours and is now updated. Neither is touched when it belongs to another run.
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
local recorded = 0
if redis.call('HGET', KEYS[2], 'token') == ARGV[2] then
  if ARGV[3] == '' then
    redis.call('DEL', KEYS[2])
  else
    redis.call('HSET', KEYS[2], 'state', ARGV[3], 'finishedAt', ARGV[5])
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
  recorded = 1
end
return {released, recorded}
