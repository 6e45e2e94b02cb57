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
-- ARGV[7]  our holder's name: the holder without its last "/"-part (a pod's UID), or ""
-- KEYS[5]  lockedcron:{<tag>}:fin:<token>       set by finish.lua when this token's run ended
--          (finished, or let go unstarted): a call that finds it is a late copy
-- Optionally, the blackout guard (both or neither):
-- KEYS[6]  lockedcron:{<tag>}:blackout:<job uid>  the job's blackout marker, set by the
--          controller while a blackout holds the job back:
--          "<since, unix ms> <until, unix ms> <reason>" (the controller's clock)
-- ARGV[8]  when the controller made this run, unix milliseconds (the controller's clock)
--
-- Returns one of
--   {"suppressed", <holder that succeeded>}  the ledger says the occurrence succeeded, or
--                                            an earlier holder of our name (ARGV[7]) failed it,
--                                            or our own token's run has ended (a late copy:
--                                            KEYS[5], or a failed entry of our token), "ended"
--   {"held", <current lock value>}           someone else holds the lock
--   {"blackout", <since ms>, <reason>}       the job's blackout began after the run was
--                                            made (KEYS[6], ARGV[8]); nothing is written
--   {"fence", <the counter's text>}          the fencing counter (KEYS[2]) cannot be counted
--                                            on (at or past 2^53, "nan", another type: not
--                                            ours, see nextFence); nothing is written
--   {"acquired", <fencing token>, <recovered 0|1>, <took over 0|1>,
--    <aof_enabled "0"|"1"|"">, <maxmemory_policy or "">, <problems, "," separated>,
--    <last success: occurrence, finishedAt, fence, holder, watermark ("" each when none)>}
--
-- The fencing token is max(previous token + 1, server TIME in microseconds), stored back in
-- KEYS[2]: it keeps increasing even when Redis lost the counter (restart without
-- persistence, failover that lost writes), as long as the server's clock does not go back.
-- Resending the script with the same token (the caller lost the reply) returns the same
-- grant, and gives the lock a whole ttl from the resend (the caller counts from it). A
-- lock held by our own holder whose token is the one in this occurrence's running ledger
-- entry is our crashed predecessor (same holder identity, same occurrence): it is taken
-- over with a new token and a higher fence. The durability facts (INFO persistence
-- and memory) come back with every grant; INFO and TIME are called with pcall so that an
-- ACL user without them still gets the lock (the problems field says what was denied).
-- The key's last success (written by finish.lua) comes back with every grant, so that the
-- job learns its predecessor's watermark in the same round trip.
--
-- Commands, cheapest path first: a free lock on a new occurrence runs HGET (ledger state),
-- SET NX PX, TIME + SET … GET (fence), HSET + PEXPIRE (ledger), INFO ×2 (durability) and
-- HGET ×1 (no last success) or ×5. The lock is only read (GET) when SET NX did not take
-- it, the ledger entry only deleted (DEL, for a fresh hash) when one was there, and the
-- entry's token only read when it has a state. Only commands of the documented ACL user are
-- used (+get +set +del +hset +hget +pexpire +time +info).
redis.replicate_commands() -- needed before Redis 5 for TIME before writes; a no-op after

local ttl = tonumber(ARGV[2])
local keep = math.max(tonumber(ARGV[3]), ttl)
local problems = {}

local function durability()
  local aof, policy = '', ''
  local p = redis.pcall('INFO', 'persistence')
  if type(p) == 'string' then
    -- Plain find, then a match anchored there: cheaper than a pattern scan of the reply.
    local i = string.find(p, 'aof_enabled:', 1, true)
    aof = i and string.match(p, '^%d', i + 12) or ''
  else
    table.insert(problems, 'info')
  end
  local m = redis.pcall('INFO', 'memory')
  if type(m) == 'string' then
    local i = string.find(m, 'maxmemory_policy:', 1, true)
    policy = i and string.match(m, '^[%w%-]+', i + 17) or ''
  elseif problems[#problems] ~= 'info' then
    table.insert(problems, 'info')
  end
  return aof, policy
end

local function grant(fence, recovered, tookover)
  local aof, policy = durability()
  local reply = {'acquired', fence, recovered, tookover, aof, policy, table.concat(problems, ',')}
  -- HGET, not HMGET: the documented ACL user has +hget. finish.lua writes the five fields
  -- together, so no occurrence means no last success.
  local occurrence = redis.call('HGET', KEYS[4], 'occurrence')
  if not occurrence then
    for _ = 1, 5 do
      table.insert(reply, '')
    end
    return reply
  end
  table.insert(reply, occurrence)
  for _, f in ipairs({'finishedAt', 'fence', 'holder', 'watermark'}) do
    table.insert(reply, redis.call('HGET', KEYS[4], f) or '')
  end
  return reply
end

-- Lua numbers are doubles: at 2^53 a counter + 1 is the counter again, and fences would stop
-- increasing. Ours never get there (the server's time in µs: 1.8e15 in 2026, 2^53 in the
-- year 2255), so a counter at or past it was written by someone else. So was one that is
-- not a number Lua can count on ("nan": it compares false with everything) or not a string.
local fenceLimit = 9007199254740992 -- 2^53

-- unusable reports whether the counter's text prev cannot be counted on by one.
local function unusable(prev)
  local n = tonumber(prev) or 0
  return not (n < fenceLimit)
end

-- wrongType: the counter key holds a hash, a list, … (a pcall's error reply).
local function wrongType(r)
  return type(r) == 'table' and r.err and string.find(r.err, 'WRONGTYPE', 1, true)
end

-- nextFence returns and stores max(counter + 1, server time in µs): SET … GET stores the
-- time and reads the counter in one command (Redis ≥ 6.2; GET and SET before that), and
-- only a counter ahead of the clock needs a second SET. A counter that is unusable is left
-- as it was (its text put back; a ttl on it is not kept) and nextFence returns nil and that
-- text ('WRONGTYPE' for a key of another type, which is not touched).
local function nextFence()
  local t = redis.pcall('TIME')
  if t.err then
    table.insert(problems, 'time')
    local prev = redis.pcall('GET', KEYS[2])
    if wrongType(prev) then
      return nil, 'WRONGTYPE'
    end
    if unusable(prev) then
      return nil, prev
    end
    local fence = (tonumber(prev) or 0) + 1
    redis.call('SET', KEYS[2], string.format('%d', fence))
    return fence
  end
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- %d: a plain integer (tostring would give 1.7e+15).
  local prev = redis.pcall('SET', KEYS[2], string.format('%d', now), 'GET')
  if wrongType(prev) then
    return nil, 'WRONGTYPE'
  end
  if type(prev) == 'table' and prev.err then
    prev = redis.call('GET', KEYS[2]) -- a Redis without SET … GET
    if unusable(prev) then
      return nil, prev
    end
    if (tonumber(prev) or 0) + 1 <= now then
      redis.call('SET', KEYS[2], string.format('%d', now))
    end
  elseif unusable(prev) then
    redis.call('SET', KEYS[2], prev)
    return nil, prev
  end
  local fence = (tonumber(prev) or 0) + 1
  if fence <= now then
    return now
  end
  redis.call('SET', KEYS[2], string.format('%d', fence))
  return fence
end

-- writeLedger writes our running entry; existed says an entry (any state) was there, whose
-- other fields (finishedAt, released, tookOver, …) must not survive into ours.
local function writeLedger(fence, recovered, existed, tookover)
  if existed then
    redis.call('DEL', KEYS[3])
  end
  if tookover == 1 then
    redis.call('HSET', KEYS[3], 'state', 'running', 'holder', ARGV[5], 'token', ARGV[4],
      'fence', string.format('%d', fence), 'recovered', recovered, 'acquiredAt', ARGV[6], 'tookOver', 1)
  else
    redis.call('HSET', KEYS[3], 'state', 'running', 'holder', ARGV[5], 'token', ARGV[4],
      'fence', string.format('%d', fence), 'recovered', recovered, 'acquiredAt', ARGV[6])
  end
  redis.call('PEXPIRE', KEYS[3], keep)
end

-- regrant answers a resent call whose entry still carries our token with the first grant.
-- The lock (ours) gets a whole ttl again: the caller counts its ttl from this attempt, not
-- from the one whose reply it lost, and must not find the lock expired before it stops.
local function regrant()
  redis.call('PEXPIRE', KEYS[1], ttl)
  return grant(tonumber(redis.call('HGET', KEYS[3], 'fence')) or 0,
    tonumber(redis.call('HGET', KEYS[3], 'recovered')) or 0,
    tonumber(redis.call('HGET', KEYS[3], 'tookOver')) or 0)
end

local state = redis.call('HGET', KEYS[3], 'state')
-- Our own token's run has ended (its finish or release left KEYS[5], for a while; a failed
-- entry of our token, for the entry's life): this call is a late copy of its acquire (its
-- bytes held up on a connection while a resend or the next attempt got through; a token
-- is one run's). Nothing is taken and nothing written: a grant would hold the lock for a
-- run that is over, and write a running entry over its failure, or where it left none.
if redis.call('GET', KEYS[5]) or
    (state == 'failed' and redis.call('HGET', KEYS[3], 'token') == ARGV[4]) then
  return {'suppressed', redis.call('HGET', KEYS[3], 'holder') or '', 'ended'}
end
-- A failed entry written by another holder of our name (ARGV[7] .. '/' .. another
-- instance): an earlier pod of our name ran the occurrence to its end. One name is made
-- per scheduled occurrence; a pod made again under it (a controller that resumed after
-- another one had run the occurrence and pruned its pod) does not run it a second time.
-- (A succeeded one suppresses anyway; a running one is held, or a crashed run to recover.)
if state == 'failed' and ARGV[7] and ARGV[7] ~= '' then
  local h = redis.call('HGET', KEYS[3], 'holder') or ''
  local n = #ARGV[7]
  if h ~= ARGV[5] and string.sub(h, 1, n + 1) == ARGV[7] .. '/' and not string.find(h, '/', n + 2, true) then
    return {'suppressed', h, 'failed'}
  end
end
if state == 'succeeded' then
  local cur = redis.call('GET', KEYS[1])
  if cur == ARGV[1] then
    -- Our own token (a resent call): the first grant stands if the entry is still ours;
    -- otherwise another run's success stands and we let the lock go.
    if redis.call('HGET', KEYS[3], 'token') == ARGV[4] then
      return regrant()
    end
    redis.call('DEL', KEYS[1])
  end
  return {'suppressed', redis.call('HGET', KEYS[3], 'holder') or ''}
end

-- A run made before its job's blackout began (it waited for the lock when a rollout
-- began) does not start in it. The controller knew of the runs it made after that. A
-- run our own holder already began (its entry is ours: a restarted container, a resent
-- call) is one running job, which a blackout does not stop. A marker holds for as long as
-- Redis keeps it (the controller's ttl, refreshed well within it); its until (the
-- controller's clock) is not compared with ours: a node clock ahead by more than the ttl
-- less the refresh read every marker as past its end, and its run started in the blackout.
if KEYS[6] then
  local since, why = string.match(redis.call('GET', KEYS[6]) or '', '^(%d+) %d+ ?(.*)$')
  if since and tonumber(ARGV[8]) < tonumber(since)
      and not (state and ARGV[5] ~= '' and redis.call('HGET', KEYS[3], 'holder') == ARGV[5]) then
    return {'blackout', tonumber(since), why}
  end
end

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ttl) then
  -- The lock was free.
  local fence, counter = nextFence()
  if not fence then
    redis.call('DEL', KEYS[1])
    return {'fence', counter}
  end
  local recovered = 0
  if state == 'running' then
    if redis.call('HGET', KEYS[3], 'token') == ARGV[4] then
      -- Our own entry (a retry whose first reply was lost, after the lock expired).
      recovered = tonumber(redis.call('HGET', KEYS[3], 'recovered')) or 0
    else
      -- The lock had expired while the ledger still said running: that run crashed.
      recovered = 1
    end
  end
  writeLedger(fence, recovered, state, 0)
  return grant(fence, recovered, 0)
end

-- Held (a script sees no key expire while it runs, so the GET finds what SET NX found).
local cur = redis.call('GET', KEYS[1]) or ''
local entryToken = state and redis.call('HGET', KEYS[3], 'token')
if cur == ARGV[1] then
  -- Our own token: this is the caller retrying this very call after losing its reply.
  if entryToken == ARGV[4] then
    return regrant()
  end
  -- The entry vanished (evicted) or a stale run wrote its failure there since: nobody saw
  -- our first fence. The entry is ours again, with a new fence, and the lock a whole ttl.
  local fence, counter = nextFence()
  if not fence then
    return {'fence', counter}
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  local recovered = 0
  if state == 'running' then
    recovered = 1
  end
  writeLedger(fence, recovered, state, 0)
  return grant(fence, recovered, 0)
end

-- Ours only if it is our crashed predecessor: the lock's holder is us (non-empty) and its
-- token is the one this occurrence's running entry was written with by us.
local tok, holder = string.match(cur, '^(%S+) (.*)$')
if ARGV[5] == '' or holder ~= ARGV[5] or state ~= 'running' or entryToken ~= tok
    or redis.call('HGET', KEYS[3], 'holder') ~= ARGV[5] then
  return {'held', cur}
end
local fence, counter = nextFence()
if not fence then
  return {'fence', counter}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
writeLedger(fence, 1, state, 1)
return grant(fence, 1, 1)
