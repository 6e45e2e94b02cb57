-- inspect.lua: read a key's lock as it is now, in one round trip (read only).
--
-- KEYS[1]  lockedcron:{<tag>}:lock   value "<token> <holder>"
-- KEYS[2]  lockedcron:{<tag>}:fence  the last fencing token handed out
--
-- Returns {} when the lock is not held, else {<lock value>, <pttl ms>, <fence>}. While
-- the lock is held nobody else can acquire it, so the last fencing token handed out is
-- the holder's (a takeover replaces both together).
local v = redis.call('GET', KEYS[1])
if not v then
  return {}
end
return {v, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
