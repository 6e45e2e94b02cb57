-- renew.lua: compare-and-pexpire, one round trip; keeps our running ledger entry alive.
--
-- KEYS[1]  lockedcron:{<tag>}:lock
-- KEYS[2]  lockedcron:{<tag>}:run:<unix secs>  the occurrence's ledger entry
-- ARGV[1]  our lock value, "<token> <holder>"
-- ARGV[2]  ttl in milliseconds
-- ARGV[3]  our token
-- ARGV[4]  ledger retention in milliseconds
-- ARGV[5]  our holder
-- ARGV[6]  our fencing token
-- ARGV[7]  our acquisition time, unix milliseconds
--
-- Returns 1 when the lock is still ours and its ttl was reset, 0 when it is gone or taken.
-- While the lock is ours, the ledger entry is made to live max(retention, ttl) from now (so
-- it never expires before the lock); if it vanished (evicted) it is written again as
-- running. An entry of another run is left alone.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local keep = math.max(tonumber(ARGV[4]), tonumber(ARGV[2]))
local tok = redis.call('HGET', KEYS[2], 'token')
if not tok then
  redis.call('HSET', KEYS[2], 'state', 'running', 'holder', ARGV[5], 'token', ARGV[3],
    'fence', ARGV[6], 'recovered', 0, 'acquiredAt', ARGV[7])
  tok = ARGV[3]
end
if tok == ARGV[3] then
  redis.call('PEXPIRE', KEYS[2], keep)
end
return 1
