-- The sorted and windowed queues: one function, one operation per call.
--
-- KEYS, all under the queue's hash tag:
--   1 seq     string  INCR counter, a value's seq
--   2 val     hash    seq -> the client's encoding of key, sort key, publish time, payload
--   3 vinfo   hash    seq -> deliveries
--   4 vreason hash    seq -> dead-letter reason, and 'm' .. seq -> the dead
--                     value's pend member, its key and sort part (absent
--                     for a value dead-lettered by an earlier version)
--   5 pend    zset    every pending value, all scores 0, member
--                     u16 len(key) | key | sortpart | u64 seq, so that one
--                     key's values are one range in sort order
--   6 order   zset    pullable keys, scores 0, member sortpart | key of the key's
--                     smallest pending value
--   7 pos     hash    key -> its member in order
--   8 batch   hash    lease token -> cmsgpack {key, pend members, pulled at},
--                     and 'c' .. token -> the same, a copy: the batch's values
--                     are named only there, so a garbled record must not lose them;
--                     'k' .. token -> the count of its values, ':', its key
--                     (see leaseOf), so that a batch neither names still ends
--   9 bdue    zset    lease token scored by its deadline
--  10 flight  hash    key -> leased batches
--  11 hold    zset    key scored by the end of its nack delay
--  12 dead    zset    seq scored seq (decimal)
--  13 stats   hash    lifetime counters
--  14 age     zset    every pending or leased value, all scores 0, member
--                     the value's publish time as 8 ordered bytes (see
--                     ageMember) | u64 seq: its first member names the
--                     oldest value by publish time (Stats.OldestEnqueuedAt)
-- sortpart is the sort key's order-preserving encoding: 8 bytes for
-- numbers and times; for strings the bytes with 00 escaped as 00 FF and
-- ended by 00 01, so that it delimits itself.
-- ARGV: 1 wake channel, 2 now (µs), 3 MaxDeliveries, 4 single flight
-- (1/0; the queue is single-flight as well when stats records it, see
-- singleFlight), 5 lease length (µs), 6 fixed-size sort keys (1/0), 7
-- operation; its arguments from 8.
--
-- The head is loaded once (FUNCTION LOAD, a library of its own); bind
-- sets the call's keys and arguments at the start of every call, so the
-- helpers below, made once per load, can use them. The operations are in
-- sorted_ops.lua, the body of the library's one function.
local K_SEQ, K_VAL, K_VINFO, K_VREASON, K_PEND, K_ORDER, K_POS
local K_BATCH, K_BDUE, K_FLIGHT, K_HOLD, K_DEAD, K_STATS, K_AGE
local CHAN, now, maxd, single, ackto, fixed, op
local woke, timers = false, nil
local recorded -- stats' 'single' is '1', read once a call (singleFlight); nil: not read yet
local CALLKEYS -- the call's KEYS, for need
local KEEP -- the placeholder (see held), made by the first call: a library's load has no string

local function bind(KEYS, ARGV)
  K_SEQ, K_VAL, K_VINFO, K_VREASON, K_PEND, K_ORDER, K_POS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
  K_BATCH, K_BDUE, K_FLIGHT, K_HOLD, K_DEAD, K_STATS, K_AGE = KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14]
  CHAN, now, maxd = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
  single, ackto, fixed, op = ARGV[4] == '1', tonumber(ARGV[5]), ARGV[6] == '1', ARGV[7]
  woke, timers, recorded = false, nil, nil
  CALLKEYS = KEYS
  if not KEEP then KEEP = string.rep('~', 256) end
end

-- TYPES are the types of the keys, in their order. A key overwritten
-- with another type (by hand, by a faulty client) would fail a command
-- after the call's first writes, which a Lua error does not undo (a
-- pull's removal of a key's pending values): each operation first
-- checks the keys it touches after its first write (NEED), and fails
-- with an error naming the key, before writing anything.
local TYPES = {'string', 'hash', 'hash', 'hash', 'zset', 'zset', 'hash', 'hash', 'zset', 'hash', 'zset', 'zset', 'hash', 'zset'}

-- USES are the commands the operations run, each with the positions of
-- the keys it runs them on (PUBLISH: the channel), for probe (probe.lua);
-- TestACLUsesFromSource derives them from the scripts and compares.
local USES = {
  {'GET', {1}}, {'HGET', {2, 3, 4, 7, 8, 10, 13}}, {'HMGET', {2, 3, 4, 7, 8, 10, 13}}, {'ZCARD', {5, 6, 9, 11, 12, 14}},
  {'ZRANGE', {6, 9, 11, 14}}, {'ZRANGEBYLEX', {5}}, {'ZRANGEBYSCORE', {9, 11, 12}}, {'ZSCORE', {9, 11, 12}},
  {'HDEL', {2, 3, 4, 7, 8, 10, 13}}, {'ZREM', {5, 6, 9, 11, 12, 14}}, {'ZADD', {5, 6, 9, 11, 12, 14}}, {'HSET', {2, 3, 4, 7, 8, 10, 13}},
  {'HINCRBY', {3, 10, 13}}, {'INCR', {1}}, {'DECR', {1}}, {'PUBLISH'},
}

local NEED = {
  publish = {}, -- takes back its writes instead (sorted_ops.lua)
  pull = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
  ack = {2, 3, 5, 6, 7, 10, 11, 13, 14},
  nack = {3, 4, 5, 6, 7, 10, 11, 12, 13, 14},
  extend = {},
  dead = {4, 5, 6, 7, 10, 11, 12, 13, 14},
  housekeep = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, -- not val, which it only reads (stored)
  stats = {13}, -- its counters: read as numbers
  deadlist = {},
  revive = {2, 3, 4, 5, 6, 7, 10, 11, 12, 14},
  purge = {2, 3, 4, 12},
  reviveall = {2, 3, 4, 5, 6, 7, 10, 11, 12, 14},
  purgeall = {2, 3, 4, 12},
}

-- COUNTERS are the fields of stats (position 13) that the operations add
-- to with HINCRBY, which fails on a value that is no integer (set by
-- hand or by other software), after the writes before it: checks reads
-- them in the probe of stats and checks them too.
local COUNTERS = {[13] = {'published', 'pulled', 'acked', 'leased'}}

-- need runs the checks of op (NEED, checks.lua); seen, when given,
-- gets the placeholders they read (see held).
local function need(op, seen)
  return checks(NEED[op] or {}, CALLKEYS, TYPES, COUNTERS, seen)
end

-- KEEP is the placeholder (256 '~') that the hashes val, vinfo, vreason,
-- batch and stats hold under the field '', which no seq, lease token or
-- counter is: written together when a queue first publishes (or, on a
-- queue an earlier release published to, by the first call that may
-- write), and never removed. So one of them absent while another is there
-- means that its key was deleted (DEL, FLUSHDB of some keys, an EXPIRE
-- that ran out, an eviction): what it held is lost (payloads, delivery
-- counts, dead letters' reasons and places, leased batches, the lifetime
-- counters), and going on would lose it without a word. Its length, past
-- Redis's default hash-max-listpack-value, gives those hashes the
-- hashtable encoding from the start. No earlier release reads a hash's
-- every field, so none counts or lists it. The zsets hold none: an
-- earlier release counts (ZCARD) or lists every member of pend, order,
-- bdue and dead, drops a stray member of order and prunes age; nor do
-- pos and flight, whose fields are the queue's keys, which may be any
-- string ('' included). (KEEP is declared at the top, for bind.)

-- lostkey is the error reply for key, a hash whose placeholder is gone.
local function lostkey(key)
  return redis.error_reply('LOSTKEY queue key ' .. key .. ' was deleted, but the queue holds values or did: ' ..
    'what it held is lost. To go on with what is left, write its placeholder back (HSET ' .. key ..
    ' "" <256 ~>); or delete every key of the queue to start it again')
end

-- mark writes the placeholders. held calls it only where the five keys
-- are hashes or absent, so no write fails.
local function mark()
  for _, k in ipairs({K_VAL, K_VINFO, K_VREASON, K_BATCH, K_STATS}) do redis.call('HSET', k, '', KEEP) end
end

-- READS are the operations that never write (the read function runs them).
local READS = {stats = true, deadlist = true, held = true}

-- held returns an error reply naming a hash whose placeholder (KEEP) is
-- gone, else nil, before the call writes anything; it writes them where
-- a queue has none yet and op may write. seen holds, by key, the
-- placeholders that the call's checks (need) read already; it reads the
-- others, one field a hash: no round trip (a pull reads none: its checks
-- read all five). None there is a new queue (no publish counted, the counter
-- absent or 0: a publish writes them), a queue that an earlier release
-- published to (stats counts its publishes: they are written), or one
-- whose five hashes were all deleted with the counter kept (its stats
-- too, which counts every publish). A key of another type is neither
-- there nor lost: the call's checks (need) name it where the call uses it.
local function held(op, seen)
  local have, wrong, lost = 0, 0, nil
  for _, k in ipairs({K_VAL, K_VINFO, K_VREASON, K_BATCH, K_STATS}) do
    local r = seen[k]
    if r == nil then r = redis.pcall('HGET', k, '') end
    if type(r) == 'string' then
      have = have + 1
    elseif type(r) == 'table' and r.err then
      wrong = wrong + 1
    else
      lost = lost or k
    end
  end
  if not lost then return nil end
  if have > 0 then return lostkey(lost) end
  -- No placeholder and a key of the wrong type: nothing tells a lost key
  -- (a queue whose first call met a stray key, say), and none can be
  -- written: the call's checks name that key where it uses it.
  if wrong > 0 then return nil end
  local n = redis.pcall('HGET', K_STATS, 'published')
  local s = redis.pcall('GET', K_SEQ)
  if type(n) ~= 'string' and type(s) == 'string' and s ~= '0' then return lostkey(K_VAL) end
  if not READS[op] and (op == 'publish' or (type(n) == 'string' and n ~= '0')) then mark() end
  return nil
end

local IDLE = 1000 -- the most order members a pull takes without leasing them (sorted_ops.lua)

local function keyprefix(key)
  return string.char(math.floor(#key / 256), #key % 256) .. key
end

-- prefixEnd returns the smallest string after every string that starts
-- with p (p never ends in FF: it starts with a length below 65535).
local function prefixEnd(p)
  local i = #p
  while string.byte(p, i) == 255 do i = i - 1 end
  return string.sub(p, 1, i - 1) .. string.char(string.byte(p, i) + 1)
end

local function seq8(n)
  local s = ''
  for _ = 1, 8 do
    s = string.char(n % 256) .. s
    n = math.floor(n / 256)
  end
  return s
end

local function unseq8(s)
  local n = 0
  for i = 1, 8 do n = n * 256 + string.byte(s, i) end
  return n
end

-- Byte-wise comparison: Lua's < on strings follows the server's locale.
local function bytesGreater(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

-- keyOf returns the key of an order member, nil when m has no sort part
-- of the kind fixed says (a member written by hand, or by a handle of
-- another sort key type). A string sort part ends at its first 00 01: a
-- 00 inside it is escaped as 00 FF, so a part holding a 00 not followed
-- by FF is no string's (an int's 8 bytes, say, such as 1's, which end in
-- 00 01).
local function keyOf(m, fixed8)
  if fixed8 then
    if #m < 8 then return nil end
    return string.sub(m, 9)
  end
  local at = string.find(m, '\0\1', 1, true)
  if not at then return nil end
  local part = string.sub(m, 1, at - 1)
  if string.find(part, '%z[^\255]') or string.find(part, '%z$') then return nil end
  return string.sub(m, at + 2)
end

-- placed returns the key whose place in the pull order is the member m
-- (as pos says, or as m reads when pos lost the key), nil when m is no
-- key's place: a stray, written by hand or by a faulty client, or a
-- second place of a key placed elsewhere. other tells whether m is the
-- place of a key read as the other kind of sort part: the queue was
-- published with another sort key type.
local function placed(m)
  local key = keyOf(m, fixed)
  local at = key and redis.call('HGET', K_POS, key)
  if key and at == m then return key, false end
  local okey = keyOf(m, not fixed)
  if okey and redis.call('HGET', K_POS, okey) == m then return nil, true end
  if key and not at then return key, false end
  return nil, false
end

local function first(key)
  local f = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if f[2] then return tonumber(f[2]) end
  return -1
end

local function earlier(key, t)
  local f = first(key)
  if (f < 0 or t < f) and (not timers or t < timers) then timers = t end
end

local function unplace(key)
  local old = redis.call('HGET', K_POS, key)
  if old then
    redis.call('ZREM', K_ORDER, old)
    redis.call('HDEL', K_POS, key)
  end
end

-- flightOf reads a key's count of leased batches (flight's field, false
-- when absent, counting 0): the count, or nil when it is garbled (set by
-- hand), that is when HINCRBY could not add 1 to it or take 1 from it: no
-- integer as HINCRBY reads one ('1e3', ' 1' and '+1' included, which
-- Lua's tonumber takes), or at either end of a 64-bit integer. Its 19
-- digits are compared as strings: a Lua number holds 53 bits.
local function flightOf(v)
  if not v or v == '0' then return 0 end
  local sign, digits = string.match(v, '^(%-?)([1-9]%d*)$')
  if not digits or #digits > 19 then return nil end
  if #digits == 19 and digits >= (sign == '' and '9223372036854775807' or '9223372036854775808') then return nil end
  return tonumber(v)
end

-- flights adds n (1 or -1) to the count of key's leased batches (flight)
-- and returns it. It decides from the count as it reads (flightOf) before
-- it writes, so it never fails after the call's writes (that would lose a
-- batch's values, an ack, or count a delivery no consumer saw): a garbled
-- count counts as none and is reset; only single flight reads the count.
-- A key of the wrong type is checked before (need).
local function flights(key, n)
  if flightOf(redis.call('HGET', K_FLIGHT, key)) then
    return redis.call('HINCRBY', K_FLIGHT, key, n)
  end
  if n > 0 then redis.call('HSET', K_FLIGHT, key, n) end
  return math.max(n, 0)
end

-- singleFlight tells whether a key with a batch out stays out of the
-- pull order: the caller has SingleFlight, or the queue records it (stats'
-- field 'single' is '1'), so that a handle without it that opened before
-- one with it recorded it honours it as well. The field is read once a
-- call, and only for a caller without SingleFlight: a call that places no
-- key reads nothing more than before.
local function singleFlight()
  if single then return true end
  if recorded == nil then recorded = redis.call('HGET', K_STATS, 'single') == '1' end
  return recorded
end

-- leased tells whether a key's count of leased batches (flight's field,
-- or false) is above 0; a garbled one counts as none, as flights reads it.
local function leased(v)
  local c = flightOf(v)
  return c ~= nil and c > 0
end

-- place puts key in the pull order at its smallest pending value, unless
-- it is held or, under single flight (singleFlight), has a batch out. It
-- reads before it writes, so that a key of the wrong type fails it before
-- any write.
local function place(key)
  local old = redis.call('HGET', K_POS, key)
  local p, f = keyprefix(key), nil
  if not redis.call('ZSCORE', K_HOLD, key) and
      not (singleFlight() and leased(redis.call('HGET', K_FLIGHT, key))) then
    f = redis.call('ZRANGEBYLEX', K_PEND, '[' .. p, '(' .. prefixEnd(p), 'LIMIT', 0, 1)[1]
  end
  if old then
    redis.call('ZREM', K_ORDER, old)
    redis.call('HDEL', K_POS, key)
  end
  if not f then return end
  local m = string.sub(f, #p + 1, #f - 8) .. key
  redis.call('ZADD', K_ORDER, 0, m)
  redis.call('HSET', K_POS, key, m)
  woke = true
end

-- release places the keys whose hold has ended, 1000 at most a call: the
-- rest are due still, so the next pull or housekeeping pass takes them.
local function release()
  local due = redis.call('ZRANGEBYSCORE', K_HOLD, '-inf', now, 'LIMIT', 0, 1000)
  for _, key in ipairs(due) do
    redis.call('ZREM', K_HOLD, key)
    place(key)
  end
end

-- ended counts the keys whose hold has ended that release would place
-- (with pending values; under single flight (singleFlight), none
-- leased), reading only: a key held is never in order, so stats adds
-- them to its count of pullable keys. It reads as many ended holds as release takes.
local function ended()
  local n = 0
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', K_HOLD, '-inf', now, 'LIMIT', 0, 1000)) do
    local p = keyprefix(key)
    if not (singleFlight() and leased(redis.call('HGET', K_FLIGHT, key))) and
        redis.call('ZRANGEBYLEX', K_PEND, '[' .. p, '(' .. prefixEnd(p), 'LIMIT', 0, 1)[1] then
      n = n + 1
    end
  end
  return n
end

local function zremAll(key, members)
  for i = 1, #members, 1000 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 999, #members)))
  end
end

-- unbatch returns the batch record raw decoded, nil when it does not
-- decode into a key and pending members that each end in a seq.
local function unbatch(raw)
  local ok, b = pcall(cmsgpack.unpack, raw or '')
  if not ok or type(b) ~= 'table' or type(b[1]) ~= 'string' or type(b[2]) ~= 'table' then return nil end
  for _, m in ipairs(b[2]) do
    if type(m) ~= 'string' or #m < 10 then return nil end
  end
  return b
end

-- sound tells whether the decoded batch b checks out against the
-- values stored: each of its members is under its key and long enough
-- to hold a sort part and a seq, and names a value that is there.
local function sound(b)
  local p = keyprefix(b[1])
  local minlen = #p + (fixed and 16 or 10)
  local seqs = {}
  for i, m in ipairs(b[2]) do
    if #m < minlen or string.sub(m, 1, #p) ~= p then return false end
    seqs[i] = unseq8(string.sub(m, -8))
  end
  for i = 1, #seqs, 1000 do
    local vals = redis.call('HMGET', K_VAL, unpack(seqs, i, math.min(i + 999, #seqs)))
    for _, v in ipairs(vals) do
      if not v then return false end
    end
  end
  return #seqs > 0
end

-- leaseOf reads what a pull records of a batch apart from its record
-- ('k' .. token): {key, count of values}, nil when v (false: absent, as
-- for a batch an earlier version pulled) does not read so. A count of
-- more than 15 digits is no pull's: Lua would not hold it exactly.
local function leaseOf(v)
  if not v then return nil end
  local n, at = string.match(v, '^(%d+):()')
  if not n or #n > 15 then return nil end
  return {string.sub(v, at), tonumber(n)}
end

-- fits returns the decoded record r unless the lease l, when it reads,
-- names another key or count of values: a record overwritten with another
-- batch's record decodes and checks out, and must not end that batch.
local function fits(r, l)
  if r and l and (r[1] ~= l[1] or #r[2] ~= l[2]) then return nil end
  return r
end

-- batchOf returns the batch leased as tok from its record, or from the
-- record's copy when the record does not decode, or when the two differ
-- and only the copy checks out (sound): a record garbled so that it still
-- decodes must not name the batch's values wrong. A record that disagrees
-- with the lease (fits) counts as one that does not decode. nil when
-- neither decodes. The copies agree but for damage: equal strings are
-- decoded once, so the copy costs a call one comparison. Second, the
-- lease as leaseOf reads it.
local function batchOf(tok)
  local got = redis.call('HMGET', K_BATCH, tok, 'c' .. tok, 'k' .. tok)
  local l = leaseOf(got[3])
  local b = fits(unbatch(got[1]), l)
  if got[1] == got[2] then return b, l end
  local c = fits(unbatch(got[2]), l)
  if not b or not c then return b or c, l end
  if not sound(b) and sound(c) then return c, l end
  return b, l
end

local function fence(tok)
  local dl = redis.call('ZSCORE', K_BDUE, tok)
  if not dl or tonumber(dl) <= now then return nil end
  return batchOf(tok)
end

-- drop ends the lease tok: the one place a batch's end is written, and
-- the key's count of leased batches lowered. Its key and count of values
-- are b's, or when no record of it reads (b nil), its lease l's, if that
-- reads; it returns the key, nil when neither tells it.
local function drop(tok, b, l)
  redis.call('HDEL', K_BATCH, tok, 'c' .. tok, 'k' .. tok)
  redis.call('ZREM', K_BDUE, tok)
  local key, n
  if b then
    key, n = b[1], #b[2]
  elseif l then
    key, n = l[1], l[2]
  else
    return nil
  end
  if flights(key, -1) <= 0 then redis.call('HDEL', K_FLIGHT, key) end
  redis.call('HINCRBY', K_STATS, 'leased', -n)
  return key
end

-- delivered counts one more delivery of the value seq and returns its
-- count. A count that is not a number (garbled by hand) restarts at this
-- delivery: a Lua error here would come after the pull's writes, and
-- lose the key's values.
local function delivered(seq)
  local d = redis.pcall('HINCRBY', K_VINFO, seq, 1)
  if type(d) == 'table' then
    redis.call('HSET', K_VINFO, seq, 1)
    d = 1
  end
  return d
end

-- publishedAt returns the publish time in the stored value raw, as the 8
-- bytes of its unix nanoseconds, big-endian: raw is the client's msgpack
-- array {sort part (bin), publish time (int64), payload}. nil when raw
-- does not read so (gone, garbled).
local function publishedAt(raw)
  if type(raw) ~= 'string' or #raw < 12 or string.byte(raw, 1) ~= 0x93 then return nil end
  local c, at = string.byte(raw, 2), nil
  if c == 0xc0 then
    at = 3
  elseif c == 0xc4 then
    at = 4 + string.byte(raw, 3)
  elseif c == 0xc5 then
    at = 5 + string.byte(raw, 3) * 256 + string.byte(raw, 4)
  elseif c == 0xc6 then
    at = 7
    for i = 3, 6 do at = at + string.byte(raw, i) * 256 ^ (6 - i) end
  else
    return nil
  end
  if #raw < at + 8 or string.byte(raw, at) ~= 0xd3 then return nil end
  return string.sub(raw, at + 1, at + 8)
end

-- UNREAD stands for the publish time in the age set (K_AGE) of a value
-- whose stored record names none (gone or garbled): it sorts first, so
-- that Stats says the oldest value's time cannot be read rather than
-- report a later one.
local UNREAD = '\0\0\0\0\0\0\0\0'

-- ageMember returns the age set's member of the value seq whose stored
-- record is raw: its publish time as publishedAt reads it, the sign bit
-- flipped so that the bytes sort as the times do (before 1970 too), or
-- UNREAD, then its seq.
local function ageMember(seq, raw)
  local at = publishedAt(raw)
  if not at then return UNREAD .. seq8(seq) end
  return string.char((string.byte(at, 1) + 128) % 256) .. string.sub(at, 2) .. seq8(seq)
end

-- stored returns the stored record of the value seq, nil when it is gone
-- or val is of another type: the age set is kept by operations that do
-- not check val (NEED), and must not fail after their writes.
local function stored(seq)
  local raw = redis.pcall('HGET', K_VAL, seq)
  if type(raw) ~= 'string' then return nil end
  return raw
end

-- ageAdd puts the value seq, stored as raw, in the age set: it is
-- pending again (published, requeued from the dead set).
local function ageAdd(seq, raw)
  redis.call('ZADD', K_AGE, 0, ageMember(seq, raw))
end

-- ageDel takes the value seq, still stored, out of the age set: it is
-- acked or dead.
local function ageDel(seq)
  redis.call('ZREM', K_AGE, ageMember(seq, stored(seq)))
end

-- ageLive tells whether the age set's member m names a value still
-- pending or leased, as ageMember makes it from the record stored now:
-- not a value dead, acked or garbled since by a handle of an earlier
-- version (whose scripts keep no age set) or by hand, nor a member not
-- of ageMember's 16 bytes (garbled by hand).
local function ageLive(m)
  if #m ~= 16 then return false end
  local seq = unseq8(string.sub(m, 9))
  if redis.call('ZSCORE', K_DEAD, string.format('%.0f', seq)) then return false end
  return ageMember(seq, stored(seq)) == m
end

-- AGEHEAD is the most members a call looks at from the head of the age
-- set for a live one (ageLive), so that its cost stays bounded.
local AGEHEAD = 100

-- ageHead returns the first members of the age set to look at: the
-- first alone when it names a live value (ageLive), as it does but for
-- members an earlier version left, else the first AGEHEAD, so that a
-- call reads one member, not AGEHEAD.
local function ageHead()
  local head = redis.call('ZRANGE', K_AGE, 0, 0)
  if not head[1] or ageLive(head[1]) then return head, true end
  return redis.call('ZRANGE', K_AGE, 0, AGEHEAD - 1), false
end

-- oldest returns the oldest of live pending or leased values by publish
-- time: {'', ''} when there is none, {'t', its time as publishedAt reads
-- it}, {'u', its seq} when its stored record names no time, or {'?', why}
-- when it is unknown: the age set holds fewer members than there are
-- values, because values published by an earlier version (before the
-- age set was kept) are pending or leased still, or AGEHEAD members at
-- its head name none.
local function oldest(live)
  if live <= 0 then return {'', ''} end
  if redis.call('ZCARD', K_AGE) < live then return {'?', 'values published before their age was kept'} end
  local head, found = ageHead()
  for _, m in ipairs(head) do
    if found or ageLive(m) then
      local at = string.sub(m, 1, 8)
      if at == UNREAD then return {'u', string.format('%.0f', unseq8(string.sub(m, 9)))} end
      return {'t', string.char((string.byte(at, 1) + 128) % 256) .. string.sub(at, 2)}
    end
  end
  return {'?', 'no live value at the head of the age set'}
end

-- pruneAge takes out of the age set's head the members that name no live
-- value (ageLive), AGEHEAD at most a call: left by a handle of an earlier
-- version, they would stand before the oldest live value.
local function pruneAge()
  local head, found = ageHead()
  if found then return end
  for _, m in ipairs(head) do
    if ageLive(m) then return end
    redis.call('ZREM', K_AGE, m)
  end
end

-- toDead moves the value seq, whose pend member was m, to the dead set
-- with reason, and records m, so that a requeue puts it back under its
-- key at its sort key.
local function toDead(seq, reason, m)
  local s = string.format('%.0f', seq)
  ageDel(seq)
  redis.call('ZADD', K_DEAD, s, s)
  redis.call('HSET', K_VREASON, s, reason, 'm' .. s, m)
end

-- killPastLimit moves the values among found (the pending members of
-- key, p its prefix, minlen the least length after it) that have had
-- MaxDeliveries to the dead set, as a pull of the embedded queue does: a
-- value given back while the limit did not apply (a handle with a higher
-- limit or none) is not delivered again. It reports whether there were
-- any; the key then takes its place anew at the values left, so that the
-- pull meets it there. A count that is gone or garbled counts as none, as
-- giveback reads it.
local function killPastLimit(key, found, p, minlen)
  if maxd <= 0 then return false end
  local ms, seqs = {}, {}
  for _, pm in ipairs(found) do
    if #pm >= #p + minlen then
      ms[#ms + 1] = pm
      seqs[#seqs + 1] = unseq8(string.sub(pm, -8))
    end
  end
  local past = {}
  for i = 1, #seqs, 1000 do
    local ds = redis.call('HMGET', K_VINFO, unpack(seqs, i, math.min(i + 999, #seqs)))
    for j, d in ipairs(ds) do
      local n = tonumber(d)
      if n and n >= maxd then past[#past + 1] = {i + j - 1, d} end
    end
  end
  if #past == 0 then return false end
  for _, x in ipairs(past) do
    redis.call('ZREM', K_PEND, ms[x[1]])
    toDead(seqs[x[1]], x[2] .. ' deliveries, limit ' .. maxd .. '; not delivered again', ms[x[1]])
  end
  local w = woke
  place(key) -- pullable before as well: no one to wake
  woke = w
  return true
end

-- giveback puts a batch's values back at their sort keys, or dead at
-- MaxDeliveries; delay > 0 holds the key if a value went back, as the
-- embedded queue does: when all went dead, a hold would only hold back
-- values published since, never delivered. A key keeps the later of its
-- hold and the new one (GT): without single flight another batch of the
-- key nacked with a longer delay holds values still pending. The delivery count is read
-- only under a limit; one that is gone or garbled counts as none (a Lua
-- error here would come after drop's writes, and lose the batch's
-- values): the value is intact, and the next pull counts afresh.
local function giveback(tok, b, delay, why)
  drop(tok, b)
  local back = 0
  for _, m in ipairs(b[2]) do
    local seq = unseq8(string.sub(m, -8))
    if maxd > 0 and (tonumber(redis.call('HGET', K_VINFO, seq)) or 0) >= maxd then
      toDead(seq, maxd .. ' deliveries; last: ' .. why, m)
    else
      redis.call('ZADD', K_PEND, 0, m)
      back = back + 1
    end
  end
  if delay > 0 and back > 0 then
    earlier(K_HOLD, now + delay)
    redis.call('ZADD', K_HOLD, 'GT', now + delay, b[1])
  end
  place(b[1])
end

local function wake()
  if woke then redis.call('PUBLISH', CHAN, 'r') end
  if timers then redis.call('PUBLISH', CHAN, 't' .. string.format('%.0f', timers)) end
end


-- changeDead requeues (op 'revive') or purges the dead value seq (a
-- decimal string); at, when not '', is its publish time as publishedAt
-- returns it, and the value must have been published then. A requeued
-- value is pending again under its key at its sort key, its delivery
-- count reset; a purged one is gone with its payload. Returns 0, or -1:
-- no such dead value, -2: published at another time, -3: its publish
-- time cannot be read, -4 (revive): its key was not recorded (see
-- vreason). It reads everything it checks before its first write.
local function changeDead(op, seq, at)
  if not redis.call('ZSCORE', K_DEAD, seq) then return -1 end
  if at ~= '' then
    local got = publishedAt(redis.call('HGET', K_VAL, seq))
    if not got then return -3 end
    if got ~= at then return -2 end
  end
  local mk = 'm' .. seq
  if op == 'revive' then
    local m = redis.call('HGET', K_VREASON, mk)
    if not m or #m < 2 then return -4 end
    local n = string.byte(m, 1) * 256 + string.byte(m, 2)
    if #m < 2 + n then return -4 end
    singleFlight() -- place decides by it: read before the first write
    redis.call('ZREM', K_DEAD, seq)
    redis.call('HDEL', K_VREASON, seq, mk)
    redis.call('HSET', K_VINFO, seq, 0)
    redis.call('ZADD', K_PEND, 0, m)
    ageAdd(seq, stored(seq))
    place(string.sub(m, 3, 2 + n))
  else
    redis.call('ZREM', K_DEAD, seq)
    redis.call('HDEL', K_VREASON, seq, mk)
    redis.call('HDEL', K_VAL, seq)
    redis.call('HDEL', K_VINFO, seq)
  end
  return 0
end
