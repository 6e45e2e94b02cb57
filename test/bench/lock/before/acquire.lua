-- acquire.lua: take the lock for one occurrence, in one round trip.
--
-- KEYS[1]  lockedcron:{<tag>}:lock             the lock; value = "<token> <holder>"
-- KEYS[2]  lockedcron:{<tag>}:fence            the fencing counter (never expires)
-- KEYS[3]  lockedcron:{<tag>}:run:<unix secs>  the occurrence's ledger entry (a hash)
-- KEYS[4]  lockedcron:{<tag>}:last             the key's last success (a hash, never expires):
--          occurrence (unix secs), finishedAt (unix ms), fence, holder, watermark
-- ARGV[1]  lock value, "<token> <holder>"
-- ARGV[2]  lock ttl in milliseconds
-- ARGV[3]  ledger retention in milliseconds (the entry lives at least as long as the lock)
-- ARGV[4]  token
-- ARGV[5]  holder
-- ARGV[6]  acquisition time, unix milliseconds (the caller's clock; informational)
--
-- Returns one of
--   {"suppressed", <holder that succeeded>}  the ledger says the occurrence succeeded
--   {"held", <current lock value>}           someone else holds the lock
--   {"acquired", <fencing token>, <recovered 0|1>, <took over 0|1>,
--    <aof_enabled "0"|"1"|"">, <maxmemory_policy or "">, <problems, "," separated>,
--    <last success: occurrence, finishedAt, fence, holder, watermark ("" each when none)>}
--
-- The fencing token is max(previous token + 1, server TIME in microseconds), stored back in
-- KEYS[2]: it keeps increasing even when Redis lost the counter (restart without
-- persistence, failover that lost writes), as long as the server's clock does not go back.
-- Resending the script with the same token (the caller lost the reply) returns the same
-- grant. A lock held by our own holder whose token is the one in this occurrence's running
-- ledger entry is our crashed predecessor (same holder identity, same occurrence): it is
-- taken over with a new token and a higher fence. The durability facts (INFO persistence
-- and memory) come back with every grant; INFO and TIME are called with pcall so that an
-- ACL user without them still gets the lock (the problems field says what was denied).
-- The key's last success (written by finish.lua) comes back with every grant, so that the
-- job learns its predecessor's watermark in the same round trip.
redis.replicate_commands() -- needed before Redis 5 for TIME before writes; a no-op after

local ttl = tonumber(ARGV[2])
local keep = math.max(tonumber(ARGV[3]), ttl)
local problems = {}

local function durability()
  local aof, policy = '', ''
  local p = redis.pcall('INFO', 'persistence')
  if type(p) == 'string' then
    aof = string.match(p, 'aof_enabled:(%d)') or ''
  else
    table.insert(problems, 'info')
  end
  local m = redis.pcall('INFO', 'memory')
  if type(m) == 'string' then
    policy = string.match(m, 'maxmemory_policy:([%w%-]+)') or ''
  elseif problems[#problems] ~= 'info' then
    table.insert(problems, 'info')
  end
  return aof, policy
end

local function grant(fence, recovered, tookover)
  local aof, policy = durability()
  local reply = {'acquired', fence, recovered, tookover, aof, policy, table.concat(problems, ',')}
  -- HGET, not HMGET: the documented ACL user has +hget.
  for _, f in ipairs({'occurrence', 'finishedAt', 'fence', 'holder', 'watermark'}) do
    table.insert(reply, redis.call('HGET', KEYS[4], f) or '')
  end
  return reply
end

-- nextFence returns and stores max(counter + 1, server time in µs).
local function nextFence()
  local fence = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
  local t = redis.pcall('TIME')
  if t.err then
    table.insert(problems, 'time')
  else
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if now > fence then
      fence = now
    end
  end
  -- %d: a plain integer (tostring would give 1.7e+15).
  redis.call('SET', KEYS[2], string.format('%d', fence))
  return fence
end

local function writeLedger(fence, recovered)
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'state', 'running', 'holder', ARGV[5], 'token', ARGV[4],
    'fence', string.format('%d', fence), 'recovered', recovered, 'acquiredAt', ARGV[6])
  redis.call('PEXPIRE', KEYS[3], keep)
end

local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  -- Our own token: this is the caller retrying this very call after losing its reply.
  if redis.call('HGET', KEYS[3], 'token') == ARGV[4] then
    return grant(tonumber(redis.call('HGET', KEYS[3], 'fence')) or 0,
      tonumber(redis.call('HGET', KEYS[3], 'recovered')) or 0,
      tonumber(redis.call('HGET', KEYS[3], 'tookOver')) or 0)
  end
  -- The entry vanished (evicted) or a stale run wrote its outcome there since: nobody saw
  -- our first fence. Another run's success stands (we let the lock go); otherwise the
  -- entry is ours again, with a new fence.
  local st = redis.call('HGET', KEYS[3], 'state')
  if st == 'succeeded' then
    redis.call('DEL', KEYS[1])
    return {'suppressed', redis.call('HGET', KEYS[3], 'holder') or ''}
  end
  local fence = nextFence()
  local recovered = 0
  if st == 'running' then
    recovered = 1
  end
  writeLedger(fence, recovered)
  return grant(fence, recovered, 0)
end

local state = redis.call('HGET', KEYS[3], 'state')
if state == 'succeeded' then
  return {'suppressed', redis.call('HGET', KEYS[3], 'holder') or ''}
end
local entryToken = redis.call('HGET', KEYS[3], 'token')

if cur then
  -- Held. Ours only if it is our crashed predecessor: the lock's holder is us (non-empty)
  -- and its token is the one this occurrence's running entry was written with by us.
  local tok, holder = string.match(cur, '^(%S+) (.*)$')
  if ARGV[5] == '' or holder ~= ARGV[5] or state ~= 'running' or entryToken ~= tok
      or redis.call('HGET', KEYS[3], 'holder') ~= ARGV[5] then
    return {'held', cur}
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  local fence = nextFence()
  writeLedger(fence, 1)
  redis.call('HSET', KEYS[3], 'tookOver', 1)
  return grant(fence, 1, 1)
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
local fence = nextFence()
local recovered = 0
if state == 'running' then
  if entryToken == ARGV[4] then
    -- Our own entry (a retry whose first reply was lost, after the lock expired).
    recovered = tonumber(redis.call('HGET', KEYS[3], 'recovered')) or 0
  else
    -- The lock had expired while the ledger still said running: that run crashed.
    recovered = 1
  end
end
writeLedger(fence, recovered)
return grant(fence, recovered, 0)
