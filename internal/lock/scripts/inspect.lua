-- inspect.lua: read a key's lock as it is now, in one round trip (read only).
--
-- KEYS[1]  lockedcron:{<tag>}:lock   value "<token> <holder>"
-- KEYS[2]  lockedcron:{<tag>}:fence  the last fencing token handed out
--
-- Returns {} when the lock is not held, else {<lock value>, <pttl ms>, <fence>}. While
-- the lock is held nobody else can acquire it, so the last fencing token handed out is
-- the holder's (a takeover replaces both together). The pttl is -1 when the user may not
-- run PTTL (the ACL user docs/lockwrap.md documents for lockwrap has no need of it).
local v = redis.call('GET', KEYS[1])
if not v then
  return {}
end
local ttl = redis.pcall('PTTL', KEYS[1])
if type(ttl) ~= 'number' then
  ttl = -1
end
return {v, ttl, redis.call('GET', KEYS[2]) or ''}
