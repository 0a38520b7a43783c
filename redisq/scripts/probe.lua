
-- probe runs every command the library's functions run (USES, defined by
-- the library's head: each command with the positions of the keys it runs
-- on), on those keys, under pcall, in a form that leaves every key as it
-- was: Redis checks a function's commands against the caller's ACL only
-- as it runs them, and a refusal after a function's first write would
-- leave a half-done change (a pop without its lease), so Open asks first.
-- It returns '' when all are granted, else what the first refusal says,
-- prefixed with the command and its key. Errors of another kind (a key of
-- the wrong type) are the other checks' business.
local PROBE = '#walq-probe' -- a field or member no function writes

local function refused(r)
  return type(r) == 'table' and r.err and not string.find(r.err, 'WRONGTYPE', 1, true) and
    not string.find(r.err, 'not an integer', 1, true)
end

-- FORMS run one command on key k so that nothing changes: reads of the
-- probe field or member, or of nothing; removals of it where it is
-- absent; additions of it taken back at once; a counter moved and moved
-- back. A write form runs only where the probe field or member is absent
-- (free, as it always is): else it is skipped.
local FORMS = {
  GET = function(k) return redis.pcall('GET', k) end,
  HGET = function(k) return redis.pcall('HGET', k, PROBE) end,
  HGETALL = function(k) return redis.pcall('HGETALL', k) end,
  HMGET = function(k) return redis.pcall('HMGET', k, PROBE) end,
  ZCARD = function(k) return redis.pcall('ZCARD', k) end,
  ZCOUNT = function(k) return redis.pcall('ZCOUNT', k, 1, 0) end,
  ZMSCORE = function(k) return redis.pcall('ZMSCORE', k, PROBE) end,
  ZRANGE = function(k) return redis.pcall('ZRANGE', k, 1, 0) end,
  ZRANGEBYLEX = function(k) return redis.pcall('ZRANGEBYLEX', k, '+', '-') end,
  ZRANGEBYSCORE = function(k) return redis.pcall('ZRANGEBYSCORE', k, 1, 0) end,
  ZSCORE = function(k) return redis.pcall('ZSCORE', k, PROBE) end,
  ZPOPMIN = function(k) return redis.pcall('ZPOPMIN', k, 0) end,
  HDEL = function(k, free) return free and redis.pcall('HDEL', k, PROBE) end,
  ZREM = function(k, free) return free and redis.pcall('ZREM', k, PROBE) end,
  ZADD = function(k, free) return free and redis.pcall('ZADD', k, 'XX', 0, PROBE) end,
  HSET = function(k, free)
    local r = free and redis.pcall('HSET', k, PROBE, 1)
    if r == 1 then redis.call('HDEL', k, PROBE) end -- HDEL is probed before
    return r
  end,
  HINCRBY = function(k, free)
    local r = free and redis.pcall('HINCRBY', k, PROBE, 1)
    if r == 1 then redis.call('HDEL', k, PROBE) end
    return r
  end,
  -- The counter, where it is a number or absent, moved up and back down:
  -- an absent one is left '0', which every function reads as absent (the
  -- next seq is 1 either way; a sorted queue's Open records its sort key
  -- kind before the probe, as a new queue's); a refused DECR leaves one
  -- number skipped.
  INCR = function(k, n)
    local r = n and redis.pcall('INCR', k)
    if type(r) ~= 'number' then return r end
    r = redis.pcall('DECR', k)
    if refused(r) then return r, 'DECR' end
    return r
  end,
  INCRBY = function(k, n) return n and redis.pcall('INCRBY', k, 0) end,
  -- A deadline past every other: a housekeeper armed earlier ignores it.
  PUBLISH = function() return redis.pcall('PUBLISH', CHAN, 't4611686018427387904') end,
}

-- WRITES are the forms that need the probe field or member absent (or,
-- for a counter, a number or nothing).
local WRITES = {HDEL = 'H', HSET = 'H', HINCRBY = 'H', ZREM = 'Z', ZADD = 'Z', INCR = 'S', DECR = 'S', INCRBY = 'S'}

-- free tells whether the write form of cmd may run on key k.
local function free(k, cmd)
  local kind = WRITES[cmd]
  if kind == 'S' then
    local v = redis.pcall('GET', k)
    return v == false or tonumber(v) ~= nil
  end
  if kind == 'H' then return redis.pcall('HGET', k, PROBE) == false end
  return redis.pcall('ZSCORE', k, PROBE) == false
end

local function probe()
  for _, use in ipairs(USES) do
    local cmd = use[1]
    if cmd == 'PUBLISH' then
      local r = FORMS.PUBLISH()
      if refused(r) then return 'PUBLISH on ' .. CHAN .. ': ' .. r.err end
    end
    for _, i in ipairs(use[2] or {}) do
      local k = CALLKEYS[i]
      local r, which = FORMS[cmd == 'DECR' and 'INCR' or cmd](k, WRITES[cmd] and free(k, cmd))
      if refused(r) then return (which or cmd) .. ' on ' .. k .. ': ' .. r.err end
    end
  end
  return ''
end
