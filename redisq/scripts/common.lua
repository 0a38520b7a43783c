-- Shared head of the ack queue's library. The library is loaded into the
-- server once (FUNCTION LOAD) and every operation is one of its functions
-- (FCALL): the helpers below are made once per load, not once per call,
-- and each call runs as one atomic step on the server.
--
-- KEYS, all under the queue's hash tag (layout 2, see keys.go):
--   1 seq      string  INCR counter, a message's Seq
--   2 msg      hash    every message that is not acked or purged, in three fields:
--                        seq       -> record (below)
--                        'b' .. seq -> the client's encoding of id, enqueue time, headers, payload
--                        'i' .. id  -> seq
--                      one hash, so that a message is written, read and
--                      removed with one command, not one per field; and
--                      the lifetime count of deliveries under '#d', which
--                      a lease reads and writes with its message; '#q'
--                      while no consumer may be waiting (see waiting);
--                      '#w' and '#t', which spare a common dequeue the
--                      look at the delayed and lease keys (see promote
--                      and announce)
--   3 ready    zset    seq scored seq (ready again, due delays) or FRESH+seq (never delivered)
--   4 delayed  zset    seq scored by its due time
--   5 lease    zset    seq scored by its lease deadline
--   6 dead     zset    seq scored seq
--   7 acked    zset    producer id scored by ack time, for Options.DedupWindow
--   8 stats    hash    lifetime counters of the rarer events (nacked, expired,
--                      dead, purged) and live producer ids (pids); the
--                      count of enqueued messages is seq, that of acked
--                      ones seq less the live and the purged
-- ARGV: 1 wake channel, 2 now (µs), 3 MaxDeliveries (<= 0: no limit),
-- 4 DedupWindow (µs); the function's own arguments follow from 5. The
-- one-message functions (bindsome) take fewer keys and a layout of
-- their own, given in their files.
-- Times are microseconds on the clients' clock, passed in by the caller.
--
-- The names below hold the call's keys and arguments: bind sets them at
-- the start of every call (the server runs one call at a time), so the
-- helpers defined once can use them.
--
-- A number handed to redis.call is formatted with '%.17g', and one joined
-- with '..' with '%.14g': both cost about a microsecond for the large
-- integers a queue deals in (times in µs, scores past 2^52), more than
-- most commands. So what a call sends is a string: the caller's own
-- arguments where they serve (NOW, a seq as read), else one
-- string.format(INT). The options are converted only when set. Only
-- numbers go through string.format: its '%s' stops at a NUL byte in a
-- string shorter than 100 bytes, and ids and reasons are any bytes.
local K_SEQ, K_MSG, K_READY, K_DELAYED, K_LEASE, K_DEAD, K_ACKED, K_STATS
local CHAN, now, NOW, maxd, window
local lim -- the count at which a ready message is not delivered again (see atlimit)
local CALLKEYS -- the call's keys by their position above, for need (nil: not made yet)
local woke = false -- a message became ready: PUBLISH once at the end
local timers = nil -- the earliest new deadline to announce, if any
local w_unset = false -- promote left '#w' absent: see promote and with_w
local KEEP -- see below; made by the first call, as loading may use none of Lua's libraries
-- INT formats a number that may pass 2^31 (a time in µs, a seq, a
-- counter): '%d', unless the server's C long is 32 bits (Lua 5.1 casts
-- a '%d' argument to one, and a time would wrap), then '%.0f', slower.
-- Lengths use '%d' everywhere; a delivery count, which may pass 2^31
-- (COUNT), is written with HEAD (a record's head) or INT.
local INT, HEAD
-- DIGITS and COUNT bound the delivery count a record is read with (see
-- leasable): a number of at most 14 digits is an integer that Lua holds
-- exactly and prints whole, with INT and with '..' ('%.14g') alike, and
-- no dequeue writes a larger one (see atlimit).
local DIGITS, COUNT = 14, 99999999999999
-- NUM and SUCC hold, for the numbers most records carry as delivery
-- counts and id lengths (0 to 99, written as INT writes them), the
-- number and, for a count, the next count as a string: a look-up costs
-- a fifth of a conversion (strtod, or string.format). A string not in
-- them (a larger number, or one written otherwise, '007') is converted.
-- FRESHREC holds the head of a new record by the length of its id
-- (enqueue), made on first use.
local NUM, SUCC, FRESHREC

-- bindargs sets the names of the call's common arguments: the wake
-- channel (nil: publish derives it), now, MaxDeliveries and DedupWindow,
-- as strings. bind calls it; the functions bound by bindsome call it
-- with the arguments of their own layout.
local function bindargs(chan, at, md, win)
  if not KEEP then
    KEEP = string.rep('~', 256)
    INT = string.format('%d', 2 ^ 40) == '1099511627776' and '%d' or '%.0f'
    HEAD = '%d:' .. INT .. ':'
    NUM, SUCC, FRESHREC = {}, {}, {}
    for i = 0, 99 do
      local d = string.format('%d', i)
      NUM[d], SUCC[d] = i, string.format('%d', i + 1)
    end
  end
  CHAN, NOW, maxd, window = chan, at, 0, 0
  now = 0
  if at ~= '0' then now = NOW + 0 end -- one strtod; tonumber makes two
  if md ~= '0' then maxd = NUM[md] or md + 0 end -- the client's integers: one strtod, none for most limits
  if win ~= '0' then window = win + 0 end
  lim = COUNT
  if maxd > 0 and maxd < COUNT then lim = maxd end
  woke, timers, w_unset = false, nil, false
end

-- freshrec returns the record of a new message with no producer id whose
-- id is id (see decode): '0:0::' len(id) ':' id. Generated ids have one
-- length: the head is kept for lengths under 256.
local function freshrec(id)
  local n = #id
  local h = FRESHREC[n]
  if not h then
    h = string.format('0:0::%d:', n)
    if n < 256 then FRESHREC[n] = h end
  end
  return h .. id
end

-- The hints a lease reads with its message ('#w', '#t', '#d', below)
-- stay the same from one lease to the next ('#d' is the one the last
-- lease wrote): memo keeps the last string read of each and its number
-- (tonumber: nil for no number), so that one conversion serves them all.
-- Equal strings are one object in Lua: the test costs no comparison of
-- bytes. MEMO holds a pair per hint, string then number.
local MEMO = {}
local function memo(i, v)
  if v ~= MEMO[i] then MEMO[i], MEMO[i + 1] = v, tonumber(v) end
  return MEMO[i + 1]
end
local M_W, M_T, M_D = 1, 3, 5

-- counted returns the lifetime count of deliveries dc as a lease writes
-- it to '#d', and notes it for memo when the string reads back as dc: a
-- whole number from 0 to COUNT. Else the next lease converts what it
-- reads: a count read as -1.5 becomes -0.5, written '0', and noting
-- -0.5 for '0' would have the next lease of any queue whose '#d' is '0'
-- write '0' again.
local function counted(dc)
  local dn = string.format(INT, dc)
  if dc >= 0 and dc <= COUNT and dc % 1 == 0 then MEMO[M_D], MEMO[M_D + 1] = dn, dc end
  return dn
end

-- bind binds a call given every key of the queue, in the order above.
local function bind(KEYS, ARGV)
  K_SEQ, K_MSG, K_READY, K_DELAYED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_LEASE, K_DEAD, K_ACKED, K_STATS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
  CALLKEYS = KEYS
  bindargs(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
end

-- bindsome binds the keys of a call given only the keys its function
-- touches (every key a function touches is one of its call's keys, as
-- Redis Cluster requires): each key is given at its position above, nil
-- where the call lacks it (scripts.go writes the call); the function
-- then calls bindargs. Each key and argument a call carries costs the
-- server a string and a slot in a table that grows by doubling, and the
-- one-message functions (enqueue1, lease1, ack1) run for every message,
-- so they take no more than they use. need makes CALLKEYS when it runs.
local function bindsome(seq, msg, ready, delayed, lease, dead, acked, stats)
  K_SEQ, K_MSG, K_READY, K_DELAYED = seq, msg, ready, delayed
  K_LEASE, K_DEAD, K_ACKED, K_STATS = lease, dead, acked, stats
  CALLKEYS = nil
end

-- publish publishes msg on the wake channel. A call that was not given
-- it derives it from msg's name: walq:{NAME}:2:msg, walq:{NAME}:wake
-- (keys.go; TestWakeFromMsgKey pins the two).
local function publish(msg)
  if not CHAN then CHAN = string.sub(K_MSG, 1, -6) .. 'wake' end
  redis.call('PUBLISH', CHAN, msg)
end

-- TYPES are the types of the keys, in their order: a key the operator or
-- a faulty client overwrote with another type makes a command on it fail,
-- and a Lua error does not undo the writes before it (a dequeue's pop, a
-- giveback's end of the lease). So a function either checks the keys it
-- will touch after its first write (need) before that write, or, on the
-- hot paths (a lone enqueue and dequeue), runs the command that may fail
-- under pcall and takes back what it wrote; either way a key of the
-- wrong type fails the call with the queue as it was, with an error
-- naming it. The checks are lists of key positions, made once per load.
local TYPES = {'string', 'hash', 'zset', 'zset', 'zset', 'zset', 'zset', 'hash'}

-- USES are the commands the functions run, each with the positions of
-- the keys it runs them on (PUBLISH: the channel), for probe (probe.lua);
-- TestACLUsesFromSource derives them from the scripts and compares.
local USES = {
  {'GET', {1}}, {'HGET', {2, 8}}, {'HGETALL', {8}}, {'HMGET', {2, 8}}, {'ZCARD', {3, 4, 5, 6, 7}},
  {'ZCOUNT', {4, 5, 7}}, {'ZMSCORE', {5, 7}}, {'ZRANGE', {3, 4, 5, 6}}, {'ZRANGEBYSCORE', {3, 4, 5, 6, 7}},
  {'ZSCORE', {3, 5, 6}}, {'ZPOPMIN', {3}}, {'HDEL', {2}}, {'ZREM', {3, 4, 5, 6, 7}},
  {'ZADD', {3, 4, 5, 6, 7}}, {'HSET', {2}}, {'HINCRBY', {2, 8}}, {'INCR', {1}}, {'DECR', {1}},
  {'INCRBY', {1}}, {'PUBLISH'},
}

-- COUNTERS are the fields of stats (position 8) that the functions add
-- to with HINCRBY, which fails on a value that is no integer (set by
-- hand or by other software), after the writes before it: need reads
-- them in the probe of stats and checks them too.
local COUNTERS = {[8] = {'nacked', 'expired', 'dead', 'purged', 'pids'}}

-- need runs the checks of the positions in list (checks.lua) on the
-- call's keys, which it makes for a call bound by bindsome.
local function need(list)
  if not CALLKEYS then CALLKEYS = {K_SEQ, K_MSG, K_READY, K_DELAYED, K_LEASE, K_DEAD, K_ACKED, K_STATS} end
  return checks(list, CALLKEYS, TYPES, COUNTERS)
end

-- The checks of each function (positions in TYPES). Keys read before the
-- first write check themselves: their read fails first.
local ENQ_ALL, ENQ_IDS = {2, 3, 4}, {2, 3, 4, 7, 8} -- an enqueue but a lone one
-- A burial writes lease, dead and stats, and may empty ready, after
-- which the dequeue promotes: it reads delayed, so BURY checks it too.
local DELAYED, BURY = {4}, {4, 5, 6, 8} -- see dequeue.lua
local BURIES = 1000 -- burials and kills (see atlimit) after which a dequeue returns: a batch checks after each round of pops, so may move BURIES - 1 + max
local SETTLE = {ack = {7, 8}, nack = {3, 4, 6, 8}, release = {3, 6, 8}, extend = {}, dead = {6, 8}, corrupt = {6, 8}}
-- Housekeeping writes msg, ready, delayed, lease, dead and stats, never
-- seq or the dedup stamps: a wrong type there must not stop lease
-- expiry. The dead-letter ops may write the stamps too (a purge).
local HOUSEKEEP, DEADOPS = {2, 3, 4, 5, 6, 8}, {2, 3, 6, 7, 8}
local ALL = {1, 2, 3, 4, 5, 6, 7, 8}

local FRESH = 4503599627370496 -- 2^52: never-delivered messages sort after every ready-again one

-- KEEP is a field (of msg, under the field '') and a member
-- (of ready and lease, scored +inf) that no seq or id can be, written at a
-- queue's first enqueue and never removed. It keeps those keys from
-- vanishing when the queue drains, and its length (past Redis's default
-- *-max-listpack-value of 64) gives them the hashtable and skiplist
-- encodings from the start: a small listpack key recreated at every
-- drain made each batch's HSET, HMGET, ZADD and ZMSCORE linear in the
-- key's size, several times slower in a busy small queue.
-- keep returns an error reply when one of those keys holds the wrong
-- type; what it wrote before stays (placeholders only), and the caller
-- takes back its seq, so that the next first enqueue writes them again.
-- It writes msg's last: msg holds it only once all three do, that is
-- once a first enqueue took its seq for good (see newcount).
local function keep()
  for _, k in ipairs({K_READY, K_LEASE}) do
    local r = redis.pcall('ZADD', k, 'inf', KEEP)
    if type(r) == 'table' then return r end
  end
  local r = redis.pcall('HSET', K_MSG, '', KEEP)
  if type(r) == 'table' then return r end
  return nil
end

-- newcount runs when the counter seq gave an enqueue the queue's first
-- seq: it writes the placeholders (keep), unless msg and lease hold
-- theirs already. Then the queue had enqueued before and its counter
-- was deleted (DEL, FLUSHDB of it alone, an EXPIRE that ran out):
-- counting again from 1 would give new messages the seqs of live ones,
-- writing over their records and bodies. So it returns an error reply,
-- and the caller takes back its seq, which leaves the counter at 0:
-- every enqueue is refused until the operator restores it. msg's
-- placeholder alone proves nothing: the releases before this check
-- wrote it first, and when ready's or lease's then failed (a key of the
-- wrong type) they took the seq back to 0 with msg's placeholder left
-- and lease's never written, on a queue that never held a message. A
-- msg or lease of the wrong type reads as no placeholder; keep then
-- refuses it.
local function newcount()
  if redis.pcall('HGET', K_MSG, '') == KEEP and type(redis.pcall('ZSCORE', K_LEASE, KEEP)) == 'string' then
    return redis.error_reply('LOSTSEQ queue key ' .. K_SEQ .. ' was deleted, but the queue holds messages ' ..
      'or did (key ' .. K_MSG .. '): an enqueue would reuse their seqs; restore it with SET to at least the ' ..
      'largest numeric field of ' .. K_MSG .. ', and to at least 1 (or delete every key of the queue)')
  end
  return keep()
end

-- intact tells whether the keys of the call that hold a placeholder
-- (msg, ready and lease: see keep) are all there, before the call
-- writes anything. Those placeholders are written together at a queue's
-- first enqueue and never removed, so one of them absent while another
-- is present means that its key was deleted (DEL, FLUSHDB of it alone,
-- an EXPIRE that ran out, an eviction): the messages it held are gone,
-- and going on would lose them without a word (a deleted ready set
-- leaves its messages undelivered for good, a deleted lease set their
-- leases unending, a deleted msg hash their records and bodies). So
-- the call is refused with an error reply naming the key, and every
-- call after it, until the operator decides (see the reply). None of
-- them present while the counter says the queue enqueued means that
-- all three were deleted. Only the first enqueue of a queue finds none
-- and no counter. Some but not all of them present is no loss either on
-- a queue whose counter is 0 or absent (or not carried) and whose keys
-- hold no message and never leased one (untouched): a first enqueue
-- refused on a key of the wrong type leaves that (keep writes them one
-- by one; the releases before the check of a lost counter wrote msg's
-- first), and the next first enqueue writes them all (newcount). The
-- releases before 5a7e6e2 kept the seq of such a refused enqueue (1):
-- a queue they refused that way, once repaired, runs without lease's
-- placeholder (or ready's), and this version reports that key as lost
-- until the operator writes the placeholder back (doc.go).
-- msg's placeholder is also the layout's mark: a release that changes
-- what layout 2's keys hold writes another value there (256 bytes
-- whose tail after the '~' names its layout) and another member in
-- place of those of ready and lease, and this one refuses the queue
-- with an error reply (LAYOUT) naming both layouts, rather than misread
-- it. The checks cost a call one read per key it carries among
-- the three: no round trip. A key of the wrong type is no lost key
-- here (there): the call's own checks name it, when it uses the key. The functions that run
-- for each message (lone enqueues, leases and acks) do not call it
-- first: they tell the placeholders from the replies of the commands
-- they run anyway (see leaseone, enqueue1.lua, ack1.lua), and call it
-- only where a reply says one is missing, before their first write or
-- after taking it back. lostkey is the error reply for key.
local function lostkey(key)
  return redis.error_reply('LOSTKEY queue key ' .. key .. ' was deleted, but the queue holds messages or did: ' ..
    'what it held is lost. To go on with what is left, write its placeholder back (HSET ' .. (K_MSG or 'msg') ..
    ' "" <256 ~> for msg, ZADD <key> +inf <256 ~> for ready and lease); or delete every key of the queue to start it again')
end

-- there tells whether r, the reply of a read of a placeholder under
-- pcall, finds it or finds its key of the wrong type.
local function there(r)
  return type(r) == 'string' or (type(r) == 'table' and r.err ~= nil)
end

-- untouched tells whether the call's keys hold no message and never
-- leased one: no member but the placeholder (+inf) in ready, delayed,
-- lease and dead, no lifetime count of deliveries ('#d') in msg. With
-- a counter at 0 or absent, that is a queue whose first enqueue was
-- refused on a key of the wrong type after some placeholders were
-- written (keep writes them one by one, and the releases before
-- newcount in another order), not one that lost a key: no message can
-- be lost. A key of the wrong type is passed over: the call's own
-- checks name it.
local function holds(key) -- a member below +inf in the zset key, if the call carries it
  if not key then return false end
  local r = redis.pcall('ZRANGEBYSCORE', key, '-inf', '(inf', 'LIMIT', 0, 1)
  return type(r) == 'table' and r[1] ~= nil
end

local function untouched()
  if holds(K_READY) or holds(K_DELAYED) or holds(K_LEASE) or holds(K_DEAD) then return false end
  return not K_MSG or type(redis.pcall('HGET', K_MSG, '#d')) ~= 'string'
end

local function intact()
  local keep = KEEP or string.rep('~', 256)
  local have, lost = 0, nil
  local m = false
  if K_MSG then
    local r = redis.pcall('HGET', K_MSG, '')
    m = there(r)
    if type(r) == 'string' and r ~= keep then
      return redis.error_reply('LAYOUT queue key ' .. K_MSG .. ' holds the mark of layout ' ..
        (string.match(r, '^~*(.*)$') or '') .. ' (field \'\'), this version handles layout 2 only: ' ..
        'open the queue with a version of redisq that handles that layout')
    end
    if m then have = have + 1 else lost = K_MSG end
  end
  if K_READY then
    if there(redis.pcall('ZSCORE', K_READY, keep)) then have = have + 1 else lost = lost or K_READY end
  end
  if K_LEASE then
    if there(redis.pcall('ZSCORE', K_LEASE, keep)) then have = have + 1 else lost = lost or K_LEASE end
  end
  if not lost then return nil end
  if K_SEQ then
    local s = redis.pcall('GET', K_SEQ)
    if type(s) == 'string' and (tonumber(s) or 0) > 0 then return lostkey(lost) end
  end
  if untouched() then return nil end
  return lostkey(lost)
end

-- card is the number of messages in the zset key.
local function card(key)
  local n = redis.call('ZCARD', key)
  if redis.call('ZSCORE', key, KEEP) then n = n - 1 end
  return n
end

-- A message's record is the table {id, producer 0/1, deliveries, lease
-- token ('' when none), dead-letter reason ('' when none)}, stored as one
-- plain string (cheaper than cmsgpack in a script; dead.go decodes it):
--   producer ':' deliveries ':' token ':' len(id) ':' id reason
-- decode returns nil when raw (a string, or false when the field is
-- absent) is no record: see bury.
local function decode(raw)
  if not raw then return nil end
  local p, d, tok, n, at = string.match(raw, '^(%d):(%d+):(%d*):(%d+):()')
  if not at then return nil end
  local stop = at + tonumber(n)
  if stop - 1 > #raw then return nil end
  return {string.sub(raw, at, stop - 1), tonumber(p), tonumber(d), tok, string.sub(raw, stop)}
end

local function encode(r)
  return string.format(HEAD, r[2], r[3]) .. r[4] .. string.format(':%d:', #r[1]) .. r[1] .. r[5]
end

-- owner returns the id of the record raw and whether a producer gave it,
-- if tok names the record's live delivery and dl, its lease deadline as
-- read (nil when none), has not passed: the fence of every settling by
-- receipt. A record whose id runs past its end names no delivery: the
-- id read would be cut, maybe another message's.
local function owner(raw, dl, tok)
  if not raw or not dl or dl + 0 <= now then return nil end
  local p, t, n, at = string.match(raw, '^(%d):%d+:(%d*):(%d+):()')
  if t ~= tok or at + (NUM[n] or n + 0) - 1 > #raw then return nil end
  return string.sub(raw, at, at + (NUM[n] or n + 0) - 1), p == '1'
end

local function getrec(seq)
  local raw = redis.call('HGET', K_MSG, seq)
  if not raw then return nil end
  return decode(raw)
end

local function putrec(seq, r)
  redis.call('HSET', K_MSG, seq, encode(r))
end

local function ready(seq)
  redis.call('ZADD', K_READY, seq, seq)
  woke = true
end

-- many calls cmd key with the items of list as arguments, at most 1000
-- per call: one call for many messages is far cheaper in a script. It
-- returns the sum of the replies (integers).
local function many(cmd, key, list)
  local n = 0
  for i = 1, #list, 1000 do
    n = n + redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
  return n
end

local function count(field, n)
  if n ~= 0 then redis.call('HINCRBY', K_STATS, field, n) end
end

-- A message whose record does not parse (overwritten by hand or by a
-- faulty client), or whose record or body is gone, can be neither
-- delivered nor given back. A script must find that out before its first
-- write for the message: a Lua error does not undo the writes before it,
-- and one after a ZPOPMIN would leave the message neither ready nor
-- leased. Such a message goes to the dead-letter set instead, with the
-- reason 'corrupt record: ' and what is wrong, so that the operator sees
-- it, and requeue or purge work on it.
--
-- leasable returns the parts of the record raw that a lease rewrites
-- (head, deliveries, tail), or nil and what is wrong; body is the
-- message's body as read (false when absent). A delivery count of more
-- than DIGITS digits is unreadable: Lua would not hold or print it
-- exactly, and no dequeue writes one (it delivers no message that had
-- COUNT deliveries: atlimit).
local function leasable(raw, body)
  if not raw then return nil, 'missing' end
  local head, d, tail, n = string.match(raw, '^(%d:)(%d+):%d*(:(%d+):.*)$')
  if not n or #d > DIGITS or (NUM[n] or n + 0) + #n + 2 > #tail then return nil, 'unreadable' end
  if not body then return nil, 'body missing' end
  return head, d, tail
end

-- bodyid returns the id at the head of body, the client's msgpack
-- encoding of the message: an array whose first element is the id, a
-- string (read by hand: the server's cmsgpack cannot read the bin
-- payload after it). nil when body does not start so.
local function bodyid(body)
  local a, c = string.byte(body, 1, 2)
  if not c or a < 0x91 or a > 0x9f then return nil end
  local at, n = 3, nil
  if c >= 0xa0 and c <= 0xbf then
    n = c - 0xa0
  elseif c == 0xd9 then
    at, n = 4, string.byte(body, 3)
  elseif c == 0xda then
    local x, y = string.byte(body, 3, 4)
    if y then at, n = 5, x * 256 + y end
  end
  if not n or at + n - 1 > #body then return nil end
  return string.sub(body, at, at + n - 1)
end

-- salvage returns a record of the message seq whose record as read is
-- raw and whose body is body: raw decoded when it parses, else one with
-- what can still be told: the producer flag and deliveries where raw
-- still starts with them (0 for a count over COUNT, which would not
-- print whole), and the id from the body when the id index
-- confirms it ('' when not: the index field, if any, then stays).
local function salvage(seq, raw, body)
  local r = decode(raw)
  if r then
    if r[3] > COUNT then r[3] = 0 end
    return r
  end
  r = {'', 0, 0, '', ''}
  local p, d = string.match(raw or '', '^([01]):(%d+):')
  if p then r[2], r[3] = tonumber(p), #d > DIGITS and 0 or tonumber(d) end
  local id = body and bodyid(body)
  if id and redis.call('HGET', K_MSG, 'i' .. id) == seq then r[1] = id end
  return r
end

-- bury moves the message seq, out of the ready set or leased, to the
-- dead-letter set, because of what is wrong with its record (see
-- leasable) or body. When its id cannot be told, the reason says so: a
-- producer id it held is then freed only by a requeue or purge by that
-- id (dead.lua), and a listing cannot show it.
local function bury(seq, raw, body, why)
  local r = salvage(seq, raw, body)
  if r[1] == '' then why = why .. '; id unknown' end
  r[4], r[5] = '', 'corrupt record: ' .. why
  redis.call('ZREM', K_LEASE, seq)
  putrec(seq, r)
  redis.call('ZADD', K_DEAD, seq, seq)
  count('dead', 1)
end

-- A ready message that had MaxDeliveries already (given back while the
-- limit did not apply: by a handle with a higher limit or none) is not
-- delivered again: the dequeue that pops it moves it to the dead-letter
-- set instead, as the embedded queue does, and pops the next one in its
-- place; it counts against BURIES with the burials. So is one that had
-- COUNT deliveries, whatever the limit (lim, set by bind): the count one
-- more delivery wrote would not read. atlimit tells whether a message
-- delivered d times (the digits leasable returns) is such a one.
local function atlimit(d)
  return (NUM[d] or d + 0) >= lim
end

-- killAtLimit moves the message seq, popped from ready, whose record as
-- read is raw (leasable passed it) and which was delivered d times, to
-- the dead-letter set with the embedded queue's reason, which gives d as
-- a number (a count of '003' read as 3), and the limit it reached (lim:
-- COUNT when the handle's is higher or none). lim <= d <= COUNT, so INT
-- formats both whole.
local function killAtLimit(seq, raw, d)
  local r = decode(raw)
  r[4], r[5] = '', string.format(INT .. ' deliveries, limit ' .. INT .. '; not delivered again', d, lim)
  putrec(seq, r)
  redis.call('ZADD', K_DEAD, seq, seq)
  count('dead', 1)
end

-- drop removes messages for good (ack, purge), with one command per key
-- for all of them: the one place a message's removal is written. seqs
-- lists the messages, fields their three fields in msg (see forget);
-- stamps, if any, the score-member pairs (now, id) that keep a producer
-- id refused for DedupWindow, and pids counts the messages a producer
-- named; unlease (acks) ends their leases too. It returns an error reply
-- when a key it writes holds the wrong type, having written nothing.
local function drop(seqs, fields, stamps, pids, unlease)
  if #seqs == 0 then return end
  if pids > 0 then -- only a producer id touches acked and stats
    local bad = need(SETTLE.ack)
    if bad then return bad end
  end
  if unlease then many('ZREM', K_LEASE, seqs) end
  many('HDEL', K_MSG, fields)
  if stamps and #stamps > 0 then many('ZADD', K_ACKED, stamps) end
  count('pids', -pids)
end

-- gathering makes the lists forget fills: seqs, fields, stamps, pids,
-- drop's arguments. One message alone (a lone Ack) needs none: its
-- lists are made whole at once, not grown (drop keeps positional
-- arguments so that it costs that ack no table).
local function gathering()
  return {{}, {}, {}, 0}
end

-- forget notes in g, made by gathering, that the message seq, whose id
-- is id (given by a producer: pid), goes for good; drop(g[1], g[2],
-- g[3], g[4], ...) removes what g holds.
local function forget(g, seq, id, pid)
  local seqs, fields = g[1], g[2]
  seqs[#seqs + 1] = seq
  local f = #fields
  fields[f + 1], fields[f + 2], fields[f + 3] = seq, 'b' .. seq, 'i' .. id
  if pid then
    g[4] = g[4] + 1
    if window > 0 then
      local st = g[3]
      st[#st + 1], st[#st + 2] = NOW, id
    end
  end
end

local function first(key)
  local f = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if f[2] and f[1] ~= KEEP then return tonumber(f[2]) end
  return -1
end

-- popone takes the first ready message: its seq and score, nil when none;
-- then also true when ready held not even its placeholder (see intact).
local function popone()
  local p = redis.call('ZPOPMIN', K_READY)
  if p[1] == KEEP then
    redis.call('ZADD', K_READY, 'inf', KEEP)
    return nil
  end
  if not p[1] then return nil, nil, true end
  return p[1], p[2]
end

-- popmany takes up to max ready messages, in order; it returns their
-- seqs, and ZPOPMIN's reply for putback.
local function popmany(max)
  local popped = redis.call('ZPOPMIN', K_READY, max)
  local seqs = {}
  for i = 1, #popped, 2 do
    if popped[i] == KEEP then
      redis.call('ZADD', K_READY, 'inf', KEEP)
    else
      seqs[#seqs + 1] = popped[i]
    end
  end
  return seqs, popped
end

-- putback returns the messages popmany took (popped, its reply) to the
-- ready set, with their scores.
local function putback(popped)
  local args = {}
  for i = 1, #popped, 2 do
    if popped[i] ~= KEEP then args[#args + 1], args[#args + 2] = popped[i + 1], popped[i] end
  end
  many('ZADD', K_READY, args)
end

-- records reads the record and body of the messages seqs[from..to], in
-- that order; with state, then the fields '#w', '#t' and '#d'. With
-- protected, an error (msg of the wrong type) is returned, not raised.
local function records(seqs, from, to, state, protected)
  local fields, n = {}, 0
  for j = from, to do
    fields[n + 1], fields[n + 2] = seqs[j], 'b' .. seqs[j]
    n = n + 2
  end
  if state then fields[n + 1], fields[n + 2], fields[n + 3] = '#w', '#t', '#d' end
  if protected then return redis.pcall('HMGET', K_MSG, unpack(fields)) end
  return redis.call('HMGET', K_MSG, unpack(fields))
end

-- The field '#w' of msg holds a time (µs) before which no delayed message
-- falls due, NONE when none is delayed: a dequeue reads it with the
-- message it leases and promotes only once it has passed, instead of
-- looking at the delayed key every time. promote, which reads the
-- earliest due time anyway, sets it; every delayed write of this version
-- lowers it (lower_w). Absent means unknown: promote. A handle of an
-- older version adds delayed messages without lowering it; those are
-- made ready by the housekeepers, at the due time they announce, and by
-- any dequeue that finds nothing ready.
local NONE = 4611686018427387904 -- 2^62

-- promote makes up to limit delayed messages whose time has come ready
-- and records in '#w' when the next falls due; w is the field as read,
-- if known. With nothing delayed and w unknown it writes nothing: msg
-- may not exist (a new queue), and the pass must not create it; the
-- caller's next write of msg adds '#w' (with_w), and until then an
-- absent '#w' only costs a look at the delayed key. It returns how many
-- it made ready and the earliest due time left (-1 when none).
local function promote(limit, w)
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', NOW, 'LIMIT', 0, limit)
  for _, seq in ipairs(due) do
    redis.call('ZREM', K_DELAYED, seq)
    ready(seq)
  end
  local f = first(K_DELAYED)
  local nw = f
  if f < 0 then nw = NONE end
  w_unset = not w and nw == NONE
  if nw ~= w and not w_unset then redis.call('HSET', K_MSG, '#w', string.format(INT, nw)) end
  return #due, f
end

-- with_w appends '#w' = NONE to fields, the arguments of an HSET of msg,
-- when the last promote left it unwritten, and returns fields.
local function with_w(fields)
  if w_unset then fields[#fields + 1], fields[#fields + 2] = '#w', string.format(INT, NONE) end
  return fields
end

-- lower_w lowers '#w' to due, a delayed message's due time, when it is
-- known and later.
local function lower_w(due)
  local w = tonumber(redis.call('HGET', K_MSG, '#w'))
  if w and due < w then redis.call('HSET', K_MSG, '#w', string.format(INT, due)) end
end

-- giveback ends a lease without an ack: dead at MaxDeliveries, else
-- delayed or ready again. A record whose delivery count does not read
-- (more than COUNT, as leasable has it) is buried instead, as a dequeue
-- buries it when ready: the count would not print whole. A count the
-- library wrote reads: a lease writes at most COUNT. It returns whether
-- the message is live again.
local function giveback(seq, r, delay, why)
  if r[3] > COUNT then
    bury(seq, redis.call('HGET', K_MSG, seq), nil, 'unreadable')
    return false
  end
  redis.call('ZREM', K_LEASE, seq)
  r[4] = ''
  if maxd > 0 and r[3] >= maxd then
    r[5] = r[3] .. ' deliveries; last: ' .. why
    redis.call('ZADD', K_DEAD, seq, seq)
    count('dead', 1)
  elseif delay > 0 then
    redis.call('ZADD', K_DELAYED, string.format(INT, now + delay), seq)
    lower_w(now + delay)
  else
    ready(seq)
  end
  putrec(seq, r)
  return r[5] == ''
end

-- fence returns the record of seq if tok names its live delivery.
local function fence(seq, tok)
  local raw = redis.call('HGET', K_MSG, seq)
  if not raw or not owner(raw, redis.call('ZSCORE', K_LEASE, seq), tok) then return nil end
  return decode(raw)
end

-- earlier notes t when it is before every deadline in key: housekeepers
-- whose timer is later must re-arm. f, when given, is key's first
-- deadline as read before (first), for a caller that notes t only once
-- it has added it.
local function earlier(key, t, f)
  f = f or first(key)
  if (f < 0 or t < f) and (not timers or t < timers) then timers = t end
end

-- A new lease would need the same look at the lease key every time. The
-- field '#t' of msg instead holds the deadline of the last lease a
-- dequeue announced (an Extend's announcements leave it): while it lies
-- ahead, every housekeeper is armed for it or earlier (the announcement
-- kicked those armed later, and a housekeeping pass arms for it:
-- housekeep returns it, and removes it once it has passed), so a lease
-- that runs out no earlier needs no announcement. announce tells
-- whether a lease running out at dls (µs, a string) is announced, given
-- the field's value t as read; if so, the caller writes dls to the field
-- with the lease.
local function announce(dls, t)
  local dl = dls + 0
  t = memo(M_T, t)
  if t and t > now and t <= dl then return false end
  if not timers or dl < timers then timers = dl end
  return true
end

-- Announcing new messages: an enqueue publishes 'r' only when a consumer
-- may be waiting for them. A dequeue that finds too few messages removes
-- the field '#q' of the message hash (its caller may block: waiting);
-- the first enqueue after that sets it again, in the HSET of its
-- messages, and publishes because the field was new. While '#q' is set
-- no enqueue publishes: every consumer woken since leases on and wakes
-- the next one of its handle (dequeue.go), until one finds nothing.
-- Pub/sub then costs one message per run of enqueues, not one per
-- enqueue and handle. Other ways of making messages ready (nack, expiry,
-- due delays, requeue) publish every time, through wake.
local function waiting()
  redis.call('HDEL', K_MSG, '#q')
end

-- wake publishes 'r' when a message became ready, 't<µs>' when a deadline
-- earlier than any before was set.
local function wake()
  if woke then publish('r') end
  if timers then publish('t' .. string.format(INT, timers)) end
end

-- leaseone leases one message (a lone Dequeue) as dequeue.lua leases
-- many, with no table built but the reply, to the delivery whose token is
-- tok, until the deadline dls (µs, a string), and returns the call's
-- reply: {-1, seq, deliveries, body}, else {hint} as dequeue. With full,
-- the call carries the keys of every step; else (lease1) those of all
-- but the burials and kills (dead, stats): a popped message that needs
-- one goes back, unchanged, and the reply is {-3}, "call dequeue" (the
-- rare case pays two calls so that the common one carries two keys
-- fewer); and a leased message comes as one string, seq ':' deliveries
-- ':' body, which the server turns into its reply for less than a table.
-- A record is rewritten in place: its deliveries go up by one and its
-- token becomes this delivery's. '#w' and '#t' come with the
-- message's fields; when a delayed message may be due, the popped one
-- goes back and the pop is redone after the promotion. A popped message
-- that cannot be leased (see leasable) is buried, and one at the limit
-- killed (killAtLimit), before anything else is written for it, and the
-- next one is popped in its place, up to BURIES of them: a call that
-- buried or killed that many returns the hint -2, "call again", so that
-- no number of damaged records or messages past the limit makes one
-- call run long.
-- Keys of the wrong type (see need) cost a lone dequeue no check: ready
-- fails the pop, msg the read after it and lease the first write after
-- it, each undone by putting the message back; delayed and the bury
-- path's keys are checked before their first use after a pop. Due delayed
-- messages promoted before the failure stay ready, and every error
-- return announces them (wake), or no consumer blocked meanwhile would
-- hear of them: the housekeeping pass at their due time finds nothing
-- left to promote.
local function leaseone(dls, tok, full)
  local seq, score, bare = popone()
  if not seq then
    -- ready has no placeholder, or msg none (lost, another layout's, or
    -- a new queue): intact tells, before promote writes
    local h = redis.call('HMGET', K_MSG, '#w', '')
    if bare or h[2] ~= KEEP then
      local bad = intact()
      if bad then return bad end
    end
    local n, hint = promote(128, tonumber(h[1]))
    if n == 0 then
      waiting()
      wake()
      return {hint}
    end
    seq, score = popone()
  end
  local got = redis.pcall('HMGET', K_MSG, seq, 'b' .. seq, '#d', '#w', '#t', '')
  if got.err then
    redis.call('ZADD', K_READY, score, seq)
    wake()
    return got
  end
  if got[6] ~= KEEP then -- msg lost, or another layout's mark (intact)
    redis.call('ZADD', K_READY, score, seq)
    wake()
    return intact() or lostkey(K_MSG)
  end
  local w = memo(M_W, got[4])
  if not w or w <= now then
    local bad = need(DELAYED)
    if bad then
      redis.call('ZADD', K_READY, score, seq)
      wake()
      return bad
    end
    -- lease's placeholder, which the ZADD below tells, is looked at
    -- here before promote writes (intact)
    if not there(redis.pcall('ZSCORE', K_LEASE, KEEP)) then
      redis.call('ZADD', K_READY, score, seq)
      wake()
      return intact() or lostkey(K_LEASE)
    end
    if promote(128, w) > 0 then
      redis.call('ZADD', K_READY, score, seq)
      seq, score = popone()
      got = redis.call('HMGET', K_MSG, seq, 'b' .. seq, '#d', '#w', '#t')
    end
  end
  local head, d, tail = leasable(got[1], got[2])
  local dead = not head or atlimit(d)
  if dead and not full then
    redis.call('ZADD', K_READY, score, seq)
    wake()
    return {-3}
  end
  if dead then
    local bad = need(BURY)
    if bad then
      redis.call('ZADD', K_READY, score, seq)
      wake()
      return bad
    end
  end
  local buried = 0
  while dead do
    if head then killAtLimit(seq, got[1], d) else bury(seq, got[1], got[2], d) end
    buried = buried + 1
    if buried == BURIES then
      wake()
      return {-2}
    end
    seq, score = popone()
    if not seq then -- nothing ready: promote, as above
      local n, hint = promote(128, nil)
      if n == 0 then
        waiting()
        wake()
        return {hint}
      end
      seq, score = popone()
    end
    got = redis.call('HMGET', K_MSG, seq, 'b' .. seq, '#d', '#w', '#t')
    head, d, tail = leasable(got[1], got[2])
    dead = not head or atlimit(d)
  end
  local ds = SUCC[d] or string.format(INT, d + 1)
  local rec = head .. ds .. ':' .. tok .. tail
  local dn = counted((memo(M_D, got[3]) or 0) + 1)
  local bad = redis.pcall('ZADD', K_LEASE, dls, seq, 'inf', KEEP)
  if type(bad) == 'table' then
    redis.call('ZADD', K_READY, score, seq)
    wake()
    return bad
  end
  if bad == 2 then -- lease had no placeholder: lost, or another layout's mark (intact)
    redis.call('ZREM', K_LEASE, seq, KEEP)
    redis.call('ZADD', K_READY, score, seq)
    wake()
    return intact() or lostkey(K_LEASE)
  end
  if w_unset then -- rare: the fields made whole in a table
    local fields = {seq, rec, '#d', dn}
    if announce(dls, got[5]) then fields[5], fields[6] = '#t', dls end
    redis.call('HSET', K_MSG, unpack(with_w(fields)))
  elseif announce(dls, got[5]) then
    redis.call('HSET', K_MSG, seq, rec, '#d', dn, '#t', dls)
  else
    redis.call('HSET', K_MSG, seq, rec, '#d', dn)
  end
  wake()
  if full then return {-1, seq, ds + 0, got[2]} end
  return seq .. ':' .. ds .. ':' .. got[2]
end

-- leasemany leases up to max messages (DequeueBatch, lone Dequeues
-- gathered) as dequeue.lua describes, until the deadline dls (µs, a
-- string), to the deliveries whose tokens are ARGV[at + 1] on, and
-- returns dequeue's reply: {hint, seq, deliveries, body, ...}. With full
-- the call carries the keys of every step; else (lease1 for more than one
-- message) those of all but the burials and kills: as leaseone, when a
-- popped message needs one, what was popped goes back, unchanged, and the
-- reply is {-3}, "call dequeue".
local function leasemany(ARGV, dls, max, at, full)
  local seqs, popped = popmany(max)
  local promoted, hint = false, -1
  if #seqs == 0 then
    local n
    n, hint = promote(128, tonumber(redis.call('HGET', K_MSG, '#w')))
    promoted = true
    if n > 0 then seqs, popped = popmany(max) end
  end
  local out = {-1}
  local got, state, to = nil, {}, math.min(500, #seqs)
  if #seqs > 0 then
    got = records(seqs, 1, to, true, true)
    if got.err then
      putback(popped)
      wake()
      return got
    end
    local w = memo(M_W, got[2 * to + 1])
    local bad = not promoted and (not w or w <= now) and need(DELAYED)
    if bad then
      putback(popped)
      wake()
      return bad
    end
    if not promoted and (not w or w <= now) and promote(128, w) > 0 then
      putback(popped)
      seqs, popped = popmany(max)
      to = math.min(500, #seqs)
      got = records(seqs, 1, to, true)
    end
    state = {got[2 * to + 2], got[2 * to + 3]}
  end
  local recs, deadlines = {}, {}
  local k, buried = 0, 0
  while #seqs > 0 do
    local was = buried
    for from = 1, #seqs, 500 do
      to = math.min(from + 499, #seqs)
      if not got then got = records(seqs, from, to, false) end
      for j = from, to do
        local seq, raw, body = seqs[j], got[2 * (j - from) + 1], got[2 * (j - from) + 2]
        local head, d, tail = leasable(raw, body)
        if head and not atlimit(d) then
          local ds = SUCC[d] or string.format(INT, d + 1)
          k = k + 1
          local r, o = #recs, #out
          recs[r + 1], recs[r + 2] = seq, head .. ds .. ':' .. ARGV[at + k] .. tail
          deadlines[r + 1], deadlines[r + 2] = dls, seq
          out[o + 1], out[o + 2], out[o + 3] = seq, NUM[ds] or ds + 0, body
        else
          if not full then -- no keys to bury with; nothing leased yet
            putback(popped)
            wake()
            return {-3}
          end
          if buried == 0 then -- nothing but the pop is written yet
            local bad = need(BURY)
            if bad then
              putback(popped)
              wake()
              return bad
            end
          end
          if head then killAtLimit(seq, raw, d) else bury(seq, raw, body, d) end
          buried = buried + 1
        end
      end
      got = nil
    end
    seqs = {}
    if buried >= BURIES then
      woke = true -- the consumers left without a message look again
      hint = -2 -- and the caller calls again for those it leased none for
    elseif buried > was then
      seqs = popmany(max - k)
      if #seqs == 0 then -- nothing ready: promote, as above
        local n
        n, hint = promote(128, nil)
        if n > 0 then seqs = popmany(max - k) end
      end
    end
  end
  if k < max then waiting() end
  if k == 0 or hint == -2 then out[1] = hint end
  if k == 0 then
    wake()
    return out
  end
  recs[#recs + 1], recs[#recs + 2] = '#d', counted((memo(M_D, state[2]) or 0) + k)
  local lot = math.min(#deadlines, 1000) -- the first ZADD's
  if buried == 0 then
    local bad = redis.pcall('ZADD', K_LEASE, unpack(deadlines, 1, lot))
    if type(bad) == 'table' then
      putback(popped)
      wake()
      return bad
    end
  else
    redis.call('ZADD', K_LEASE, unpack(deadlines, 1, lot))
  end
  for i = lot + 1, #deadlines, 1000 do
    redis.call('ZADD', K_LEASE, unpack(deadlines, i, math.min(i + 999, #deadlines)))
  end
  -- announced once the deadlines are written: a lease that failed set none
  if announce(dls, state[1]) then recs[#recs + 1], recs[#recs + 2] = '#t', dls end
  many('HSET', K_MSG, with_w(recs))
  wake()
  return out
end

-- seqmend says how to mend the sequence counter K_SEQ holding no count
-- (seqerr, checks.lua).
local function seqmend()
  return 'set it (SET ' .. K_SEQ .. ') to at least the largest numeric field of ' .. K_MSG .. ', and to at least 1'
end

-- enqueuemany enqueues the messages of a call of enqueue1 that carries
-- more than one (enqueue1.lua: the layout, the keys, the undoing on a
-- key of the wrong type), in one command per key; the pairs of id and
-- body start after ARGV[at]; old are the stamps past the window, read by
-- the caller. Returns 1.
local function enqueuemany(ARGV, at, old)
  local n = (#ARGV - at) / 2
  local seq = redis.pcall('INCRBY', K_SEQ, n)
  if type(seq) ~= 'number' then return seqerr(K_SEQ, seq, seqmend()) end
  seq = seq - n
  if seq == 0 then
    local bad = newcount()
    if bad then
      redis.call('INCRBY', K_SEQ, -n)
      return bad
    end
  end
  local scores, fields = {}, {}
  for i = 1, n do
    local id, sq = ARGV[at - 1 + 2 * i], string.format(INT, seq + i)
    scores[2 * i - 1], scores[2 * i] = string.format(INT, FRESH + seq + i), sq
    local f = 6 * i - 6
    fields[f + 1], fields[f + 2] = sq, freshrec(id)
    fields[f + 3], fields[f + 4] = 'b' .. sq, ARGV[at + 2 * i]
    fields[f + 5], fields[f + 6] = 'i' .. id, sq
  end
  fields[6 * n + 1], fields[6 * n + 2] = '#q', '1'
  scores[2 * n + 1], scores[2 * n + 2] = 'inf', KEEP -- tells a ready set without it (intact)
  local added = redis.pcall('ZADD', K_READY, unpack(scores))
  if type(added) == 'table' then
    redis.call('INCRBY', K_SEQ, -n)
    return added
  end
  local seqs = {}
  for i = 1, n do seqs[i] = scores[2 * i] end
  if added > n then
    seqs[n + 1] = KEEP
    redis.call('ZREM', K_READY, unpack(seqs))
    redis.call('INCRBY', K_SEQ, -n)
    return intact() or lostkey(K_READY)
  end
  added = redis.pcall('HSET', K_MSG, unpack(fields))
  if type(added) == 'table' then
    redis.call('ZREM', K_READY, unpack(seqs))
    redis.call('INCRBY', K_SEQ, -n)
    return added
  end
  -- '#q' added: maybe with all of msg, lost since the last call (intact)
  if added > 3 * n and redis.call('HGET', K_MSG, '') ~= KEEP then
    local f = {}
    for i = 1, #fields, 2 do f[#f + 1] = fields[i] end
    redis.call('HDEL', K_MSG, unpack(f))
    redis.call('ZREM', K_READY, unpack(seqs))
    redis.call('INCRBY', K_SEQ, -n)
    return intact() or lostkey(K_MSG)
  end
  if old and #old > 0 then many('ZREM', K_ACKED, old) end
  if added > 3 * n then publish('r') end
  return 1
end
