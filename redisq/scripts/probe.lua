
-- probe runs every command the library's functions run (USES, defined by
-- the library's head: each command with the positions of the keys it runs
-- it on), on those keys and the channel, and tells whether the caller's
-- ACL grants each: Redis checks a function's commands against the ACL
-- only as it runs them, and a refusal after a function's first write
-- would leave a half-done change (a pop without its lease), so Open asks
-- first. The probe is registered with the flag no-writes (scripts.go):
-- Redis checks a command against the ACL before it refuses a write (or a
-- PUBLISH) in such a function, so each write is checked and refused
-- unrun. Nothing is written, published or converted; the reads read
-- nothing but an absent field or member, an empty range, a count, the
-- counter and the stats hash. It returns '' when all are granted, else
-- what the first refusal says, prefixed with the command and its key.
-- Errors of another kind (a key of the wrong type) are the other checks'
-- business.
local PROBE = '#walq-probe' -- a field or member no function writes

-- refused tells whether the reply r is the ACL's refusal (NOPERM, or, in
-- a script, "ACL failure" or "The user executing the script can't ...").
local function refused(r)
  if type(r) ~= 'table' or not r.err then return false end
  return string.find(r.err, 'NOPERM', 1, true) or string.find(r.err, 'ACL', 1, true) or
    string.find(r.err, 'The user executing the script', 1, true)
end

-- ARGS are the arguments each command takes after its key. A write is
-- never run here (the server refuses it unrun, and try raises if it
-- ran): run, HDEL, ZREM, ZADD XX and ZPOPMIN 0 would change nothing, but
-- HSET, HINCRBY, INCR, DECR and INCRBY would write their key, and
-- PUBLISH would send the channel a message.
local ARGS = {
  GET = {}, HGET = {PROBE}, HGETALL = {}, HMGET = {PROBE}, ZCARD = {}, ZCOUNT = {1, 0}, ZMSCORE = {PROBE},
  ZRANGE = {1, 0}, ZRANGEBYLEX = {'+', '-'}, ZRANGEBYSCORE = {1, 0}, ZSCORE = {PROBE}, ZPOPMIN = {0},
  HDEL = {PROBE}, ZREM = {PROBE}, ZADD = {'XX', 0, PROBE}, HSET = {PROBE, 0}, HINCRBY = {PROBE, 0},
  INCR = {}, DECR = {}, INCRBY = {0}, PUBLISH = {'t4611686018427387904'},
}

-- WRITES are the commands the server refuses in a no-writes function.
local WRITES = {HDEL = 1, ZREM = 1, ZADD = 1, HSET = 1, HINCRBY = 1, INCR = 1, DECR = 1, INCRBY = 1, ZPOPMIN = 1, PUBLISH = 1}

-- try runs cmd on k and returns the ACL's refusal, if any. A write that
-- the server ran breaks the probe's one premise: it raises.
local function try(cmd, k)
  local r = redis.pcall(cmd, k, unpack(ARGS[cmd]))
  if refused(r) then return r.err end
  if WRITES[cmd] and not (type(r) == 'table' and r.err and string.find(r.err, 'read-only', 1, true)) then
    error('walq probe: the server ran ' .. cmd .. ' in a read-only function')
  end
  return nil
end

-- probe runs the commands of USES, only those outside WRITES when
-- reads (for a handle that runs no function that writes).
local function probe(reads)
  for _, use in ipairs(USES) do
    local cmd = use[1]
    local ks = {}
    if not (reads and WRITES[cmd]) then
      for j, i in ipairs(use[2] or {}) do ks[j] = CALLKEYS[i] end
      if cmd == 'PUBLISH' then ks = {CHAN} end
    end
    for _, k in ipairs(ks) do
      local err = try(cmd, k)
      if err then return cmd .. ' on ' .. k .. ': ' .. err end
    end
  end
  return ''
end
