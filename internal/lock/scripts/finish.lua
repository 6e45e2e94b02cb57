-- finish.lua: record the run's end in the ledger and release the lock (compare-and-delete),
-- one round trip; on a success that held the lock to the end, also move the key's last
-- success (and its watermark) in the same call.
--
-- KEYS[1]  lockedcron:{<tag>}:lock
-- KEYS[2]  lockedcron:{<tag>}:run:<unix secs>
-- KEYS[3]  lockedcron:{<tag>}:fence            the newest fencing token handed out
-- KEYS[4]  lockedcron:{<tag>}:last             the key's last success (a hash, never expires)
-- KEYS[5]  lockedcron:{<tag>}:fin:<our token>   what the call that recorded our outcome
--          answered: "<state> <released> <recorded> <last> <watermarkStored> <storedWatermark>"
-- ARGV[1]  our lock value, "<token> <holder>"
-- ARGV[2]  our token
-- ARGV[3]  final ledger state: "succeeded" | "failed" | "" (release only: forget our
--          running entry, as if we never ran; one that recovered a crashed run's stays)
-- ARGV[4]  ledger retention in milliseconds
-- ARGV[5]  finish time, unix milliseconds (informational)
-- ARGV[6]  our holder
-- ARGV[7]  our fencing token
-- ARGV[8]  occurrence, unix seconds
-- ARGV[9]  new watermark ("" keeps the stored one)
-- ARGV[10] "1": monotonic, refuse a watermark smaller than the stored one (as integers when
--          both are decimal integers, else byte-wise)
-- ARGV[11] how long KEYS[5] is kept, milliseconds (past the caller's last resend)
--
-- Returns {released, recorded, last, watermarkStored, storedWatermark}:
--   released is 1 when the lock was ours and is now deleted;
--   recorded is 1 when the ledger now says ARGV[3] for us (or, for a release, our entry is
--   gone, or left as the crashed run's it recovered), 0 when the entry belongs to another
--   run (a different token), which is left alone;
--   last is 1 when the key's last success now names this run, 0 when the state is not
--   succeeded (or not recorded), 2 when it is not moved because the run cannot prove it held
--   the lock to the end (the lock no longer ours, or a newer fencing token handed out);
--   watermarkStored is 1 when ARGV[9] is now the key's watermark, 2 when the monotonic mode
--   refused it (storedWatermark then is the stored value it was smaller than), 0 otherwise.
-- A call resent after its reply was lost (same token, same state) returns the first call's
-- result, as KEYS[5] (or, once that expired, our entry, final and marked with what the first
-- call did) holds it, and changes nothing: otherwise the resent call would find the lock gone
-- (the first one released it) and report a lost lock and an unstored watermark; and once a
-- contender took the free lock after a failed run (failed does not suppress) and wrote its
-- own running entry, it reported the lock lost and the outcome not recorded too.
-- The outcome is recorded even when the lock is no longer ours (so that a finished
-- occurrence is not run again) and when the entry vanished (evicted or expired: it is
-- written again with state, holder, token, fence and finishedAt); the last success and the
-- watermark only ever move together with a recorded success under a lock held to the end.

-- cmpInt compares two decimal integers of any length (no float rounding): -1, 0, 1.
local function cmpAbs(a, b)
  a = string.gsub(a, '^0+', '')
  b = string.gsub(b, '^0+', '')
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  if a == b then
    return 0
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end
local function cmpInt(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na then a = string.sub(a, 2) end
  if nb then b = string.sub(b, 2) end
  if string.match(a, '^0*$') then na = false end -- -0 is 0
  if string.match(b, '^0*$') then nb = false end
  if na ~= nb then
    return na and -1 or 1
  end
  local c = cmpAbs(a, b)
  if na then
    return -c
  end
  return c
end
-- cmpBytes compares byte-wise (Lua's < follows the server's collation locale).
local function cmpBytes(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  if #a == #b then
    return 0
  end
  return #a < #b and -1 or 1
end
local function isInt(s)
  return string.match(s, '^%-?%d+$') ~= nil
end

-- Commands: GET (the lock), then DEL when it is ours — a lock still ours means no earlier
-- call of ours finished (it would have deleted it), so only otherwise is a resent call
-- looked for (GET of KEYS[5]; HGET token, released, state of the entry when KEYS[5] is
-- gone). Then HGET token; for a release DEL (our entry); for an outcome HSET + PEXPIRE (the
-- entry) and SET (KEYS[5]), and for a success GET (the newest fence) and HSET (the last
-- success; plus an HGET of the stored watermark when a monotonic one is given).
local released = 0
local tok -- the entry's token (false: no entry), once read
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
elseif ARGV[3] ~= '' then
  local fin = redis.call('GET', KEYS[5])
  if fin then
    local s, r, rec, last, stored, current = string.match(fin, '^(%a+) (%d) (%d) (%d) (%d) (.*)$')
    if s == ARGV[3] then
      return {tonumber(r), tonumber(rec), tonumber(last), tonumber(stored), current}
    end
  else
    tok = redis.call('HGET', KEYS[2], 'token')
    local r = tok == ARGV[2] and redis.call('HGET', KEYS[2], 'released')
    if r and redis.call('HGET', KEYS[2], 'state') == ARGV[3] then
      return {tonumber(r), 1, tonumber(redis.call('HGET', KEYS[2], 'last')) or 0,
        tonumber(redis.call('HGET', KEYS[2], 'watermarkStored')) or 0, ''}
    end
  end
end
if tok == nil then
  tok = redis.call('HGET', KEYS[2], 'token')
end
if ARGV[3] == '' then
  -- Let go unstarted. A late copy of our acquire finds this and takes nothing
  -- (acquire.lua), whoever's the entry is.
  redis.call('SET', KEYS[5], 'released', 'PX', ARGV[11])
end
if tok and tok ~= ARGV[2] then
  return {released, 0, 0, 0, ''}
end
if ARGV[3] == '' then
  -- Our entry is forgotten, as if we had never run, unless we found a crashed run's
  -- (recovered): that run began the occurrence and may have done part of it, and the
  -- entry, running without a lock, tells the next run so, as it told us. It no longer
  -- names us (a run of our holder would pass a blackout as one that began its job).
  if tok and redis.call('HGET', KEYS[2], 'recovered') ~= '1' then
    redis.call('DEL', KEYS[2])
  elseif tok then
    redis.call('HSET', KEYS[2], 'holder', '', 'token', '')
  end
  return {released, 1, 0, 0, ''}
end

-- entry writes the outcome (and, when the entry vanished, who we are) and its retention.
local function entry(...)
  if tok then
    redis.call('HSET', KEYS[2], 'state', ARGV[3], 'finishedAt', ARGV[5], 'released', released, ...)
  else
    redis.call('HSET', KEYS[2], 'state', ARGV[3], 'finishedAt', ARGV[5], 'released', released,
      'holder', ARGV[6], 'token', ARGV[2], 'fence', ARGV[7], ...)
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end

-- answer keeps what this call answers for a resent one (KEYS[5]) and returns it.
local function answer(last, stored, current)
  redis.call('SET', KEYS[5], ARGV[3] .. ' ' .. released .. ' 1 ' .. last .. ' ' .. stored .. ' ' .. current,
    'PX', ARGV[11])
  return {released, 1, last, stored, current}
end

if ARGV[3] ~= 'succeeded' then
  entry()
  return answer(0, 0, '')
end

-- A success: it becomes the key's last one only if we held the lock to the end and no
-- later holder was given a fencing token (ours is the newest).
local newest = redis.call('GET', KEYS[3])
if released ~= 1 or (newest and cmpInt(newest, ARGV[7]) > 0) then
  entry('last', 2)
  return answer(2, 0, '')
end
local stored = 0
local current = ''
if ARGV[9] ~= '' then
  if ARGV[10] == '1' then
    current = redis.call('HGET', KEYS[4], 'watermark') or ''
  end
  if current ~= '' then
    local c
    if isInt(ARGV[9]) and isInt(current) then
      c = cmpInt(ARGV[9], current)
    else
      c = cmpBytes(ARGV[9], current)
    end
    if c < 0 then
      stored = 2
    end
  end
  if stored == 0 then
    stored = 1
  end
end
if stored == 1 then
  redis.call('HSET', KEYS[4], 'occurrence', ARGV[8], 'finishedAt', ARGV[5], 'fence', ARGV[7],
    'holder', ARGV[6], 'watermark', ARGV[9])
else
  -- No watermark given, or refused: the stored one stays.
  redis.call('HSET', KEYS[4], 'occurrence', ARGV[8], 'finishedAt', ARGV[5], 'fence', ARGV[7],
    'holder', ARGV[6])
end
entry('last', 1, 'watermarkStored', stored)
if stored == 2 then
  return answer(1, 2, current)
end
return answer(1, stored, '')
