#!lua name=walq_7ec72a9526d25ff3
local LIB = 'walq_7ec72a9526d25ff3'
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
-- 4 DedupWindow (µs); the function's own arguments follow from 5.
-- Times are microseconds on the clients' clock, passed in by the caller.
--
-- The names below hold the call's keys and arguments: bind sets them at
-- the start of every call (the server runs one call at a time), so the
-- helpers defined once can use them.
local K_SEQ, K_MSG, K_READY, K_DELAYED, K_LEASE, K_DEAD, K_ACKED, K_STATS
local CHAN, now, maxd, window
local woke = false -- a message became ready: PUBLISH once at the end
local timers = nil -- the earliest new deadline to announce, if any
local KEEP -- see below; made by the first call, as loading may use none of Lua's libraries

local function bind(KEYS, ARGV)
  K_SEQ, K_MSG, K_READY, K_DELAYED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_LEASE, K_DEAD, K_ACKED, K_STATS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
  CHAN, now, maxd, window = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  woke, timers = false, nil
  if not KEEP then KEEP = string.rep('~', 256) end
end

local FRESH = 4503599627370496 -- 2^52: never-delivered messages sort after every ready-again one

-- KEEP is a field (of msg, under the field '') and a member
-- (of ready and lease, scored +inf) that no seq or id can be, written at a
-- queue's first enqueue and never removed. It keeps those keys from
-- vanishing when the queue drains, and its length (past Redis's default
-- *-max-listpack-value of 64) gives them the hashtable and skiplist
-- encodings from the start: a small listpack key recreated at every
-- drain made each batch's HSET, HMGET, ZADD and ZMSCORE linear in the
-- key's size, several times slower in a busy small queue.
local function keep()
  redis.call('HSET', K_MSG, '', KEEP)
  for _, k in ipairs({K_READY, K_LEASE}) do redis.call('ZADD', k, 'inf', KEEP) end
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
local function decode(raw)
  local p, d, tok, n, at = string.match(raw, '^(%d):(%d+):(%d*):(%d+):()')
  local stop = at + tonumber(n)
  return {string.sub(raw, at, stop - 1), tonumber(p), tonumber(d), tok, string.sub(raw, stop)}
end

local function encode(r)
  return r[2] .. ':' .. string.format('%d', r[3]) .. ':' .. r[4] .. ':' .. #r[1] .. ':' .. r[1] .. r[5]
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

-- forget removes a message for good (ack, purge); a producer id keeps
-- refusing duplicates for DedupWindow.
local function forget(seq, r)
  redis.call('HDEL', K_MSG, seq, 'b' .. seq, 'i' .. r[1])
  if r[2] == 1 then
    count('pids', -1)
    if window > 0 then redis.call('ZADD', K_ACKED, now, r[1]) end
  end
end

local function first(key)
  local f = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if f[2] and f[1] ~= KEEP then return tonumber(f[2]) end
  return -1
end

-- popone takes the first ready message: its seq and score, nil when none.
local function popone()
  local p = redis.call('ZPOPMIN', K_READY)
  if p[1] == KEEP then
    redis.call('ZADD', K_READY, 'inf', KEEP)
    return nil
  end
  return p[1], p[2]
end

-- popmany takes up to max ready messages, in order.
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
  return seqs
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
-- if known. It returns how many it made ready and the earliest due time
-- left (-1 when none).
local function promote(limit, w)
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', now, 'LIMIT', 0, limit)
  for _, seq in ipairs(due) do
    redis.call('ZREM', K_DELAYED, seq)
    ready(seq)
  end
  local f = first(K_DELAYED)
  local nw = f
  if f < 0 then nw = NONE end
  if nw ~= w then redis.call('HSET', K_MSG, '#w', string.format('%d', nw)) end
  return #due, f
end

-- lower_w lowers '#w' to due, a delayed message's due time, when it is
-- known and later.
local function lower_w(due)
  local w = tonumber(redis.call('HGET', K_MSG, '#w'))
  if w and due < w then redis.call('HSET', K_MSG, '#w', string.format('%d', due)) end
end

-- giveback ends a lease without an ack: dead at MaxDeliveries, else
-- delayed or ready again.
local function giveback(seq, r, delay, why)
  redis.call('ZREM', K_LEASE, seq)
  r[4] = ''
  if maxd > 0 and r[3] >= maxd then
    r[5] = r[3] .. ' deliveries; last: ' .. why
    redis.call('ZADD', K_DEAD, seq, seq)
    count('dead', 1)
  elseif delay > 0 then
    redis.call('ZADD', K_DELAYED, now + delay, seq)
    lower_w(now + delay)
  else
    ready(seq)
  end
  putrec(seq, r)
  return r[5] == ''
end

-- fence returns the record of seq if tok names its live delivery.
local function fence(seq, tok)
  local r = getrec(seq)
  if not r or r[4] ~= tok then return nil end
  local dl = redis.call('ZSCORE', K_LEASE, seq)
  if not dl or tonumber(dl) <= now then return nil end
  return r
end

-- earlier notes t when it is before every deadline in key: housekeepers
-- whose timer is later must re-arm.
local function earlier(key, t)
  local f = first(key)
  if (f < 0 or t < f) and (not timers or t < timers) then timers = t end
end

-- A new lease would need the same look at the lease key every time. The
-- field '#t' of msg instead holds the deadline of the last lease a
-- dequeue announced (an Extend's announcements leave it): while it lies
-- ahead, every housekeeper is armed for it or earlier (the announcement
-- kicked those armed later, and a housekeeping pass arms for it:
-- housekeep returns it, and removes it once it has passed), so a lease
-- that runs out no earlier needs no announcement. announce returns the field's new value for a
-- lease running out at dl, given its value t as read, or nil when it
-- stays; the caller writes it with the lease.
local function announce(dl, t)
  t = tonumber(t)
  if t and t > now and t <= dl then return nil end
  if not timers or dl < timers then timers = dl end
  return string.format('%d', dl)
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
  if woke then redis.call('PUBLISH', CHAN, 'r') end
  if timers then redis.call('PUBLISH', CHAN, 't' .. string.format('%.0f', timers)) end
end

redis.register_function{function_name = LIB .. '_enqueue', flags = {}, callback = function(KEYS, ARGV)
bind(KEYS, ARGV)
-- enqueue: ARGV[5] = mode, ARGV[6] = n, then per message: id, producer
-- (0/1), due (µs, 0 = now), body. Generated ids are random and never
-- checked. Mode 'all' (one EnqueueBatch): all producer ids are checked
-- before anything is written, and a duplicate refuses the whole batch.
-- Mode 'each' (concurrent Enqueues gathered into one call): a duplicate
-- is left out and the others are enqueued. Returns one code per message:
-- 1 enqueued, 0 left out as a duplicate.
if window > 0 then
  local old = redis.call('ZRANGEBYSCORE', K_ACKED, '-inf', now - window, 'LIMIT', 0, 128)
  if #old > 0 then many('ZREM', K_ACKED, old) end
end
-- One message with a generated id, ready at once (a lone Enqueue): no
-- duplicate to look for, so straight to the writes, with no table built.
if ARGV[6] == '1' and ARGV[8] == '0' and ARGV[9] == '0' then
  local id = ARGV[7]
  local seq = redis.call('INCR', K_SEQ)
  if seq == 1 then keep() end
  local sq = string.format('%d', seq) -- exact, where seq .. '' turns 1e14 and above into floats
  -- Four new fields when '#q' was absent (see waiting): the message's
  -- three (a generated id is new) and '#q'.
  local added = redis.call('HSET', K_MSG, sq, '0:0::' .. #id .. ':' .. id, 'b' .. sq, ARGV[10], 'i' .. id, sq, '#q', '1')
  redis.call('ZADD', K_READY, FRESH + seq, seq)
  if added == 4 then redis.call('PUBLISH', CHAN, 'r') end
  return {1}
end
local each, n = ARGV[5] == 'each', tonumber(ARGV[6])
local given, at_item = {}, {}
for i = 0, n - 1 do
  if ARGV[8 + i * 4] == '1' then
    given[#given + 1] = ARGV[7 + i * 4]
    at_item[#given] = i
  end
end
local skip, fresh = {}, {}
if #given > 0 then
  local seen = {}
  for from = 1, #given, 1000 do
    local part = {unpack(given, from, math.min(from + 999, #given))}
    local fields = {}
    for j, id in ipairs(part) do fields[j] = 'i' .. id end
    local live = redis.call('HMGET', K_MSG, unpack(fields))
    local at = {}
    if window > 0 then at = redis.call('ZMSCORE', K_ACKED, unpack(part)) end
    for j, id in ipairs(part) do
      if seen[id] or live[j] or (at[j] and tonumber(at[j]) > now - window) then
        if not each then return redis.error_reply('DUPLICATE ' .. id) end
        skip[at_item[from + j - 1]] = true
      else
        seen[id] = true
        fresh[#fresh + 1] = id
      end
    end
  end
end
local codes, fresh_ready = {}, false
local fields, ready, delayed = {}, {}, {}
local m = n - (#given - #fresh)
local seq, soonest = 0, nil
if m > 0 then
  seq = redis.call('INCRBY', K_SEQ, m) - m
  if seq == 0 then keep() end
end
for i = 0, n - 1 do
  if skip[i] then
    codes[#codes + 1] = 0
  else
    local b = 7 + i * 4
    local id, p, due = ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2])
    seq = seq + 1
    local f, sq = #fields, string.format('%d', seq)
    fields[f + 1], fields[f + 2] = sq, p .. ':0::' .. #id .. ':' .. id
    fields[f + 3], fields[f + 4] = 'b' .. sq, ARGV[b + 3]
    fields[f + 5], fields[f + 6] = 'i' .. id, sq
    if due > now then
      if not soonest or due < soonest then soonest = due end
      delayed[#delayed + 1] = due; delayed[#delayed + 1] = seq
    else
      ready[#ready + 1] = FRESH + seq; ready[#ready + 1] = seq
      fresh_ready = true
    end
    codes[#codes + 1] = 1
  end
end
-- With a message ready, '#q' goes with the messages' fields, all of them
-- new (see waiting in common.lua): one more added means it was absent.
if fresh_ready then fields[#fields + 1], fields[#fields + 2] = '#q', '1' end
if m > 0 and many('HSET', K_MSG, fields) > 3 * m then redis.call('PUBLISH', CHAN, 'r') end
if #fresh > 0 and window > 0 then many('ZREM', K_ACKED, fresh) end
if #ready > 0 then many('ZADD', K_READY, ready) end
if soonest then
  earlier(K_DELAYED, soonest)
  lower_w(soonest)
  many('ZADD', K_DELAYED, delayed)
end
count('pids', #fresh)
wake()
return codes

end}

redis.register_function{function_name = LIB .. '_dequeue', flags = {}, callback = function(KEYS, ARGV)
bind(KEYS, ARGV)
-- dequeue: ARGV[5] = lease length (µs), ARGV[6] = max, ARGV[7..] = one
-- fresh random lease token per message. Promotes due delays when '#w'
-- says one may be due (or nothing is ready), then leases up to max ready
-- messages: ready again (lowest seq first), then never delivered
-- (enqueue order). Returns {hint, seq, deliveries, body, ...} where hint
-- is the earliest delayed due time (-1 when none) if nothing was leased.

-- One message (a lone Dequeue): the same steps, with no table built but
-- the reply. A record is rewritten in place: its deliveries go up by
-- one and its token becomes this delivery's. '#w' and '#t' come with the
-- message's fields; when a delayed message may be due, the popped one
-- goes back and the pop is redone after the promotion.
if ARGV[6] == '1' then
  local seq, score = popone()
  if not seq then
    local n, hint = promote(128, tonumber(redis.call('HGET', K_MSG, '#w')))
    if n == 0 then
      waiting()
      wake()
      return {hint}
    end
    seq, score = popone()
  end
  local got = redis.call('HMGET', K_MSG, seq, 'b' .. seq, '#d', '#w', '#t')
  local w = tonumber(got[4])
  if (not w or w <= now) and promote(128, w) > 0 then
    redis.call('ZADD', K_READY, score, seq)
    seq = popone()
    got = redis.call('HMGET', K_MSG, seq, 'b' .. seq, '#d', '#w', '#t')
  end
  local dl = now + ARGV[5]
  local head, d, tail = string.match(got[1], '^(%d:)(%d+):%d*(:.*)$')
  d = d + 1
  local rec, dn = head .. string.format('%d', d) .. ':' .. ARGV[7] .. tail, string.format('%d', (got[3] or 0) + 1)
  local t = announce(dl, got[5])
  if t then
    redis.call('HSET', K_MSG, seq, rec, '#d', dn, '#t', t)
  else
    redis.call('HSET', K_MSG, seq, rec, '#d', dn)
  end
  redis.call('ZADD', K_LEASE, dl, seq)
  wake()
  return {-1, seq, d, got[2]}
end
local ackto, max = tonumber(ARGV[5]), tonumber(ARGV[6])
local state = redis.call('HMGET', K_MSG, '#w', '#t', '#d')
local w = tonumber(state[1])
local promoted, hint = false, -1
if not w or w <= now then
  local _
  _, hint = promote(128, w)
  promoted = true
end
local seqs = popmany(max)
if #seqs == 0 and not promoted then
  local n
  n, hint = promote(128, w)
  if n > 0 then seqs = popmany(max) end
end
local out = {-1}
if #seqs < max then waiting() end
if #seqs == 0 then
  out[1] = hint
  wake()
  return out
end
local dl = now + ackto
local recs, deadlines = {}, {}
for from = 1, #seqs, 500 do
  local part = {unpack(seqs, from, math.min(from + 499, #seqs))}
  local fields = {}
  for j, seq in ipairs(part) do fields[2 * j - 1], fields[2 * j] = seq, 'b' .. seq end
  local got = redis.call('HMGET', K_MSG, unpack(fields))
  for j, seq in ipairs(part) do
    local i = from + j - 1
    local r = decode(got[2 * j - 1])
    r[3] = r[3] + 1
    r[4] = ARGV[6 + i]
    recs[#recs + 1] = seq
    recs[#recs + 1] = encode(r)
    deadlines[#deadlines + 1] = dl
    deadlines[#deadlines + 1] = seq
    out[#out + 1] = seq
    out[#out + 1] = r[3]
    out[#out + 1] = got[2 * j]
  end
end
recs[#recs + 1], recs[#recs + 2] = '#d', string.format('%d', (tonumber(state[3]) or 0) + #seqs)
local t = announce(dl, state[2])
if t then recs[#recs + 1], recs[#recs + 2] = '#t', t end
many('HSET', K_MSG, recs)
many('ZADD', K_LEASE, deadlines)
wake()
return out

end}

redis.register_function{function_name = LIB .. '_settle', flags = {'allow-oom'}, callback = function(KEYS, ARGV)
bind(KEYS, ARGV)
-- settle: ARGV[5] = op (ack, nack, extend, dead), ARGV[6] = its argument
-- (nack delay µs, extension µs, dead-letter reason), ARGV[7] = how
-- deliveries are named: 'r' pairs of seq and lease token, 'i' message ids
-- (whichever delivery is in flight). Returns one code per delivery:
-- 0 done, 1 lease lost, 2 no delivery of that id in flight.

-- One ack by receipt (a lone Ack): the same fence and writes, with no
-- table built but the reply.
if ARGV[5] == 'ack' and ARGV[7] == 'r' and #ARGV == 9 then
  local seq = ARGV[8]
  local raw = redis.call('HGET', K_MSG, seq)
  if not raw then return {1} end
  local p, tok, n, at = string.match(raw, '^(%d):%d+:(%d*):(%d+):()')
  if tok ~= ARGV[9] then return {1} end
  local id = string.sub(raw, at, at + n - 1)
  local dl = redis.call('ZSCORE', K_LEASE, seq)
  if not dl or tonumber(dl) <= now then return {1} end
  redis.call('ZREM', K_LEASE, seq)
  redis.call('HDEL', K_MSG, seq, 'b' .. seq, 'i' .. id)
  if p == '1' then
    count('pids', -1)
    if window > 0 then redis.call('ZADD', K_ACKED, now, id) end
  end
  return {0}
end

-- Many acks by receipt (concurrent Acks gathered): the records and the
-- deadlines of all in one HMGET and one ZMSCORE, the writes in one call
-- per key, and no table per message. A message named twice is acked by
-- the receipt of its live delivery, whichever comes first; the other
-- fails.
if ARGV[5] == 'ack' and ARGV[7] == 'r' then
  local n = (#ARGV - 7) / 2
  local codes, done = {}, {}
  local gone, fields, stamps, pids = {}, {}, {}, 0
  for from = 1, n, 1000 do
    local to = math.min(from + 999, n)
    local part = {}
    for i = from, to do part[#part + 1] = ARGV[6 + 2 * i] end
    local raws = redis.call('HMGET', K_MSG, unpack(part))
    local dls = redis.call('ZMSCORE', K_LEASE, unpack(part))
    for j, seq in ipairs(part) do
      local raw, code = raws[j], 1
      if raw and dls[j] and not done[seq] and tonumber(dls[j]) > now then
        local p, tok, len, at = string.match(raw, '^(%d):%d+:(%d*):(%d+):()')
        if tok == ARGV[7 + 2 * (from + j - 1)] then
          code, done[seq] = 0, true
          local id = string.sub(raw, at, at + len - 1)
          gone[#gone + 1] = seq
          local f = #fields
          fields[f + 1], fields[f + 2], fields[f + 3] = seq, 'b' .. seq, 'i' .. id
          if p == '1' then
            pids = pids + 1
            if window > 0 then stamps[#stamps + 1], stamps[#stamps + 2] = now, id end
          end
        end
      end
      codes[#codes + 1] = code
    end
  end
  if #gone > 0 then
    many('ZREM', K_LEASE, gone)
    many('HDEL', K_MSG, fields)
    if #stamps > 0 then many('ZADD', K_ACKED, stamps) end
    count('pids', -pids)
  end
  return codes
end

local op, arg, mode = ARGV[5], ARGV[6], ARGV[7]
local codes = {}
local acked, nacked, dead = 0, 0, 0

-- Acks gather their deletions and run them as one call per key.
local gone, fields, stamps, pids = {}, {}, {}, 0
local function apply(seq, r)
  if op == 'ack' then
    gone[#gone + 1] = seq
    local f = #fields
    fields[f + 1], fields[f + 2], fields[f + 3] = seq, 'b' .. seq, 'i' .. r[1]
    if r[2] == 1 then
      pids = pids + 1
      if window > 0 then
        stamps[#stamps + 1] = now
        stamps[#stamps + 1] = r[1]
      end
    end
    acked = acked + 1
  elseif op == 'nack' then
    -- announced before giveback adds it: earlier compares with the key
    if tonumber(arg) > 0 then earlier(K_DELAYED, now + tonumber(arg)) end
    if giveback(seq, r, tonumber(arg), 'nacked') then nacked = nacked + 1 end
  elseif op == 'extend' then
    earlier(K_LEASE, now + tonumber(arg))
    redis.call('ZADD', K_LEASE, now + tonumber(arg), seq)
  else
    redis.call('ZREM', K_LEASE, seq)
    r[4], r[5] = '', arg
    putrec(seq, r)
    redis.call('ZADD', K_DEAD, seq, seq)
    dead = dead + 1
  end
end

local i, done = 8, {}
while i <= #ARGV do
  local seq, r
  if mode == 'r' then
    seq = ARGV[i]
    r = fence(seq, ARGV[i + 1])
    if done[seq] then r = nil end -- the same delivery twice in one call: settled once
    if r then done[seq] = true end
    i = i + 2
  else
    seq = redis.call('HGET', K_MSG, 'i' .. ARGV[i])
    if seq then
      r = getrec(seq)
      if r and r[4] ~= '' then r = fence(seq, r[4]) else r = nil end
    end
    i = i + 1
  end
  if r then
    apply(seq, r)
    codes[#codes + 1] = 0
  elseif mode == 'r' then
    codes[#codes + 1] = 1
  else
    codes[#codes + 1] = 2
  end
end
if #gone > 0 then
  many('ZREM', K_LEASE, gone)
  many('HDEL', K_MSG, fields)
  if #stamps > 0 then many('ZADD', K_ACKED, stamps) end
  count('pids', -pids)
end
count('nacked', nacked)
count('dead', dead)
wake()
return codes

end}

redis.register_function{function_name = LIB .. '_housekeep', flags = {'allow-oom'}, callback = function(KEYS, ARGV)
bind(KEYS, ARGV)
-- housekeep: ARGV[5] = 1 to end expired leases, ARGV[6] = limit.
-- Promotes due delays, ends leases whose deadline has passed (ready
-- again, or dead at MaxDeliveries). Returns {leases ended, the time to
-- look at leases again, earliest delayed due time}, -1 for none. The
-- time to look again is the earliest lease deadline, or the announced
-- one ('#t', see announce) when that is earlier and still ahead: a lease
-- set later may have relied on it and not been announced. A '#t' that
-- has passed is removed.
local state = redis.call('HMGET', K_MSG, '#w', '#t')
local _, delayed = promote(tonumber(ARGV[6]), tonumber(state[1]))
local n, expired = 0, 0
if ARGV[5] == '1' then
  local due = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))
  for _, seq in ipairs(due) do
    if giveback(seq, getrec(seq), 0, 'ack timeout') then expired = expired + 1 end
    n = n + 1
  end
end
count('expired', expired)
wake()
local lease, t = first(K_LEASE), tonumber(state[2])
if t and t > now and (lease < 0 or t < lease) then lease = t end
-- Once '#t' has passed for this pass, it no longer arms this housekeeper:
-- removed, it makes the next lease announce itself. Kept, a lease taken
-- by a dequeue whose clock still had it ahead would go unannounced.
if t and t <= now then redis.call('HDEL', K_MSG, '#t') end
return {n, lease, delayed}

end}

redis.register_function{function_name = LIB .. '_dead', flags = {'allow-oom'}, callback = function(KEYS, ARGV)
bind(KEYS, ARGV)
-- dead: ARGV[5] = op (requeue, purge), ARGV[6] = id, or '' for every dead
-- letter, ARGV[7] = how many at most when ''. Returns how many it
-- changed; -1 when the id names no dead letter.
local op = ARGV[5]
local seqs
if ARGV[6] ~= '' then
  local seq = redis.call('HGET', K_MSG, 'i' .. ARGV[6])
  if not seq or not redis.call('ZSCORE', K_DEAD, seq) then return -1 end
  seqs = {seq}
else
  seqs = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[7]) - 1)
end
for _, seq in ipairs(seqs) do
  redis.call('ZREM', K_DEAD, seq)
  local r = getrec(seq)
  if op == 'purge' then
    forget(seq, r)
  else
    r[3], r[5] = 0, ''
    putrec(seq, r)
    ready(seq)
  end
end
if op == 'purge' then count('purged', #seqs) end
wake()
return #seqs

end}

redis.register_function{function_name = LIB .. '_inspect', flags = {'no-writes'}, callback = function(KEYS, ARGV)
bind(KEYS, ARGV)
-- inspect (read only): ARGV[5] = 'dead' with ARGV[6] = from seq and
-- ARGV[7] = max: {seq, info, body, ...} of dead letters in seq order; or
-- 'stats': {ready, delayed, in flight, dead, dedup ids, oldest body or
-- '', counters...}.
if ARGV[5] == 'dead' then
  local out = {}
  local seqs = redis.call('ZRANGEBYSCORE', K_DEAD, ARGV[6], '+inf', 'LIMIT', 0, tonumber(ARGV[7]))
  for _, seq in ipairs(seqs) do
    out[#out + 1] = seq
    local got = redis.call('HMGET', K_MSG, seq, 'b' .. seq)
    out[#out + 1] = got[1]
    out[#out + 1] = got[2]
  end
  return out
end
-- The oldest live message that is not dead: the lowest seq among the
-- ready, delayed and leased ones (the last two scanned up to 1000).
local oldest = nil
local function consider(seq)
  if seq and seq ~= KEEP and (not oldest or tonumber(seq) < oldest) then oldest = tonumber(seq) end
end
local r = redis.call('ZRANGE', K_READY, 0, 0)
consider(r[1])
r = redis.call('ZRANGEBYSCORE', K_READY, FRESH, '+inf', 'LIMIT', 0, 1)
consider(r[1])
for _, key in ipairs({K_DELAYED, K_LEASE}) do
  for _, seq in ipairs(redis.call('ZRANGE', key, 0, 999)) do consider(seq) end
end
local body = ''
if oldest then body = redis.call('HGET', K_MSG, 'b' .. string.format('%d', oldest)) or '' end
local acked = 0
if window > 0 then acked = redis.call('ZCOUNT', K_ACKED, '(' .. (now - window), '+inf') end
local counters = redis.call('HGETALL', K_STATS)
local pids = tonumber(redis.call('HGET', K_STATS, 'pids') or '0')
local out = {card(K_READY), redis.call('ZCARD', K_DELAYED), card(K_LEASE),
  redis.call('ZCARD', K_DEAD), pids + acked, body}
for _, v in ipairs(counters) do out[#out + 1] = v end
-- The counters no operation writes (see common.lua): every message ever
-- enqueued is live (ready, delayed, in flight, dead), acked or purged.
local enqueued = tonumber(redis.call('GET', K_SEQ) or '0')
local purged = tonumber(redis.call('HGET', K_STATS, 'purged') or '0')
local live = out[1] + out[2] + out[3] + out[4]
out[#out + 1] = 'enqueued'
out[#out + 1] = enqueued
out[#out + 1] = 'delivered'
out[#out + 1] = tonumber(redis.call('HGET', K_MSG, '#d') or '0')
out[#out + 1] = 'acked'
out[#out + 1] = enqueued - live - purged
return out

end}
