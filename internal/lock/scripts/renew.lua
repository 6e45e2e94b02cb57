-- renew.lua: compare-and-pexpire, one round trip.
--
-- KEYS[1]  lockedcron:{<key>}:lock
-- ARGV[1]  our lock value, "<token> <holder>"
-- ARGV[2]  ttl in milliseconds
--
-- Returns 1 when the lock is still ours and its ttl was reset, 0 when it is gone or taken.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
