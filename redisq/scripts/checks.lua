-- The checks of a call's keys, the same in both libraries, which load
-- this first (scripts.go): each head passes checks its call's keys, their
-- types (TYPES) and the counters of its stats hash (COUNTERS).
--
-- PROBES read a key with a command of its own type that the queue runs
-- anyway (so an ACL that lets the queue run grants it): on a key of
-- another type it fails WRONGTYPE, on an absent key it answers. checks
-- runs them under pcall; TYPE is not run, nor needed in the ACL.
local PROBES = {
  string = function(k) return redis.pcall('GET', k) end,
  hash = function(k) return redis.pcall('HMGET', k, '') end,
  zset = function(k) return redis.pcall('ZCARD', k) end,
}

-- iscount reports whether the string v is a count: what HINCRBY and
-- INCR read as an integer, of at most 18 digits so that no addition
-- overflows it (Lua's tonumber takes more: '1e3', 'inf', ' 1').
local function iscount(v)
  local digits = string.match(v, '^%-?([1-9]%d*)$')
  return v == '0' or (digits ~= nil and #digits <= 18)
end

-- nocount returns the error reply of a counter, at where (a key, or a
-- key and its field), that holds v, no count; mend says how to go on.
local function nocount(where, v, mend)
  return redis.error_reply('COUNTER queue key ' .. where .. ' holds ' .. string.format('%q', string.sub(v, 1, 40)) ..
    ', not a count: the queue is left as it was; ' .. mend .. ' to go on')
end

-- seqerr returns the error reply of r, the error of an INCR or INCRBY
-- of the counter key (a string key), which wrote nothing: COUNTER naming
-- key (nocount), mend saying how to go on, where it holds no count (set
-- by hand or by other software); else it raises r as the server gave it.
local function seqerr(key, r, mend)
  local v = redis.pcall('GET', key)
  if type(v) == 'string' and not iscount(v) then return nocount(key, v, mend) end
  error(r)
end

-- counters returns an error reply naming the first of fields whose value
-- in vals (HMGET's reply) is no count, else nil.
local function counters(key, fields, vals, at)
  for j, f in ipairs(fields) do
    local v = vals[j + (at or 0)]
    if v and not iscount(v) then
      return nocount(key .. ' field ' .. f, v, 'set the field to a number (HSET ' .. key .. ' ' .. f .. ' 0)')
    end
  end
  return nil
end

-- checks returns an error reply naming the first key of the positions in
-- list that holds another type than its own in types (absent is right),
-- or the first counter (the fields counts lists for its position) that
-- is no count, else nil; keys are the call's keys by position. Any other
-- error of a probe (an ACL refusal) is returned as it is, also before
-- the first write. With seen, the read of a hash also reads its field ''
-- (a hash's probe reads only that one; a read of counters reads it
-- first), and seen[key] is set to its value (false when absent): the
-- sorted queue's placeholders (held, sorted.lua), read at no cost.
local function checks(list, keys, types, counts, seen)
  for _, i in ipairs(list) do
    local fields = counts[i]
    local r
    if fields and seen then
      r = redis.pcall('HMGET', keys[i], '', unpack(fields))
    elseif fields then
      r = redis.pcall('HMGET', keys[i], unpack(fields))
    else
      r = PROBES[types[i]](keys[i])
    end
    if type(r) == 'table' and r.err then
      if not string.find(r.err, 'WRONGTYPE', 1, true) then return r end -- a refusal, before any write
      return redis.error_reply('WRONGTYPE queue key ' .. keys[i] .. ' holds another type, not a ' ..
        types[i] .. ': the queue is left as it was; restore the key to go on')
    end
    if seen and types[i] == 'hash' then seen[keys[i]] = r[1] end
    if fields then
      local bad = counters(keys[i], fields, r, seen and 1 or 0)
      if bad then return bad end
    end
  end
  return nil
end
