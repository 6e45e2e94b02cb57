-- acquire.lua: take the lock for one occurrence, in one round trip.
--
-- KEYS[1]  lockedcron:{<key>}:lock             the lock; value = "<token> <holder>"
-- KEYS[2]  lockedcron:{<key>}:fence            the fencing counter (never expires)
-- KEYS[3]  lockedcron:{<key>}:run:<unix secs>  the occurrence's ledger entry (a hash)
-- ARGV[1]  lock value, "<token> <holder>"
-- ARGV[2]  lock ttl in milliseconds
-- ARGV[3]  ledger retention in milliseconds
-- ARGV[4]  token
-- ARGV[5]  holder
-- ARGV[6]  acquisition time, unix milliseconds (the caller's clock; informational)
--
-- Returns one of
--   {"suppressed", <holder that succeeded>}  the ledger says the occurrence succeeded
--   {"held", <current lock value>}           someone holds the lock
--   {"acquired", <fencing token>, <1 if a crashed run was recovered else 0>}
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- Our own token: this is the client retrying this very call after losing its reply.
  return {'acquired', tonumber(redis.call('HGET', KEYS[3], 'fence')) or 0,
    tonumber(redis.call('HGET', KEYS[3], 'recovered')) or 0}
end
local state = redis.call('HGET', KEYS[3], 'state')
if state == 'succeeded' then
  return {'suppressed', redis.call('HGET', KEYS[3], 'holder') or ''}
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'held', redis.call('GET', KEYS[1]) or ''}
end
local fence = redis.call('INCR', KEYS[2])
local recovered = 0
if state == 'running' then
  -- The lock had expired while the ledger still said running: that run crashed.
  recovered = 1
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'state', 'running', 'holder', ARGV[5], 'token', ARGV[4],
  'fence', fence, 'recovered', recovered, 'acquiredAt', ARGV[6])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {'acquired', fence, recovered}
