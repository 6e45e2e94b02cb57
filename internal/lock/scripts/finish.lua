-- finish.lua: record the run's end in the ledger and release the lock (compare-and-delete),
-- one round trip.
--
-- KEYS[1]  lockedcron:{<tag>}:lock
-- KEYS[2]  lockedcron:{<tag>}:run:<unix secs>
-- ARGV[1]  our lock value, "<token> <holder>"
-- ARGV[2]  our token
-- ARGV[3]  final ledger state: "succeeded" | "failed" | "" (release only: forget our
--          running entry, as if we never ran)
-- ARGV[4]  ledger retention in milliseconds
-- ARGV[5]  finish time, unix milliseconds (informational)
-- ARGV[6]  our holder
-- ARGV[7]  our fencing token
--
-- Returns {released, recorded}: released is 1 when the lock was ours and is now deleted;
-- recorded is 1 when the ledger now says ARGV[3] for us (or, for a release, our entry is
-- gone), 0 when the entry belongs to another run (a different token), which is left alone.
-- The outcome is recorded even when the lock is no longer ours (so that a finished
-- occurrence is not run again) and when the entry vanished (evicted or expired: it is
-- written again with state, holder, token, fence and finishedAt).
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
local tok = redis.call('HGET', KEYS[2], 'token')
if tok and tok ~= ARGV[2] then
  return {released, 0}
end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
  return {released, 1}
end
if not tok then
  redis.call('HSET', KEYS[2], 'holder', ARGV[6], 'token', ARGV[2], 'fence', ARGV[7])
end
redis.call('HSET', KEYS[2], 'state', ARGV[3], 'finishedAt', ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {released, 1}
