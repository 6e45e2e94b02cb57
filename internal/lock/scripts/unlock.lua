-- unlock.lua: delete a lock by hand (kubectl lockedcron unlock), compare-and-delete.
--
-- KEYS[1]  lockedcron:{<tag>}:lock   value "<token> <holder>"
-- ARGV[1]  the token the lock must have
--
-- Returns {1, <value deleted>} when the lock had that token and is now gone, {0, <value or
-- "">} when it is not held or held with another token (nothing changed). The ledger is left
-- alone: the holder may still be running and will record its outcome; a new run of the
-- same occurrence sees a running entry without a lock and counts as recovered.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0, ''}
end
local tok = string.match(v, '^(%S+)')
if tok ~= ARGV[1] then
  return {0, v}
end
redis.call('DEL', KEYS[1])
return {1, v}
