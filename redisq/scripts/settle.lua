-- settle: ARGV[5] = op (ack, nack, extend, dead, corrupt: dead, not delivered; release: ready
-- again at once, not delivered: leased for a Dequeue that left), ARGV[6] = its argument
-- (nack delay µs, extension µs, dead-letter reason), ARGV[7] = how
-- deliveries are named: 'r' pairs of seq and lease token, 'i' message ids
-- (whichever delivery is in flight). Returns one code per delivery:
-- 0 done, 1 lease lost, 2 no delivery of that id in flight. A lone ack
-- by receipt goes to ack1 (ack1.lua) instead.

-- Acks by receipt (concurrent Acks gathered, up to 1000; more take the
-- general path below): the records and the deadlines of all in one
-- HMGET and one ZMSCORE, the removals in one call per key, and no table
-- but those of the commands' arguments and the reply. A message named
-- twice is acked by the receipt of its live delivery, whichever comes
-- first; the other fails.
if ARGV[5] == 'ack' and ARGV[7] == 'r' and #ARGV <= 7 + 2 * 1000 then
  local n = (#ARGV - 7) / 2
  local seqs = {}
  for i = 1, n do seqs[i] = ARGV[6 + 2 * i] end
  local raws = redis.call('HMGET', K_MSG, unpack(seqs))
  local dls = redis.call('ZMSCORE', K_LEASE, unpack(seqs))
  local codes, gone, fields, done = {}, {}, {}, {}
  local pids, stamps = 0, nil
  for i = 1, n do
    local seq = seqs[i]
    local id, pid = nil, false
    if not done[seq] then id, pid = owner(raws[i], dls[i], ARGV[7 + 2 * i]) end
    if id then
      codes[i], done[seq] = 0, true
      gone[#gone + 1] = seq
      local f = #fields
      fields[f + 1], fields[f + 2], fields[f + 3] = seq, 'b' .. seq, 'i' .. id
      if pid then
        pids = pids + 1
        if window > 0 then
          stamps = stamps or {}
          stamps[#stamps + 1], stamps[#stamps + 2] = NOW, id
        end
      end
    else
      codes[i] = 1
    end
  end
  if #gone == 0 then return codes end
  if pids > 0 then
    local bad = need(SETTLE.ack)
    if bad then return bad end
  end
  redis.call('ZREM', K_LEASE, unpack(gone))
  many('HDEL', K_MSG, fields)
  if stamps then many('ZADD', K_ACKED, stamps) end
  count('pids', -pids)
  return codes
end

local op, arg, mode = ARGV[5], ARGV[6], ARGV[7]
do
  local bad = need(SETTLE[op] or ALL)
  if bad then return bad end
end
local codes = {}
local nacked, dead, undelivered = 0, 0, 0
local g = gathering() -- acks by id

local function apply(seq, r)
  if op == 'ack' then
    forget(g, seq, r[1], r[2] == 1)
  elseif op == 'nack' then
    -- the first due time is read before giveback adds this one, and this
    -- one announced only if giveback added it (not dead, not buried)
    local delay = tonumber(arg)
    local f = delay > 0 and first(K_DELAYED)
    if giveback(seq, r, delay, 'nacked') then
      nacked = nacked + 1
      if f then earlier(K_DELAYED, now + delay, f) end
    end
  elseif op == 'release' then
    -- leased for a Dequeue whose caller had left: no consumer got it, so
    -- its delivery is taken back (as corrupt's below), and it is ready
    -- again at once, where a nacked message goes, but counts no nack. A
    -- count that does not read is buried by giveback, as a nack's is.
    if r[3] > 0 and r[3] <= COUNT then r[3], undelivered = r[3] - 1, undelivered + 1 end
    giveback(seq, r, 0, 'released')
  elseif op == 'extend' then
    local dl = now + tonumber(arg)
    earlier(K_LEASE, dl)
    redis.call('ZADD', K_LEASE, string.format(INT, dl), seq)
  else -- dead; corrupt: a body its client could not decode, never delivered
    if op == 'corrupt' then r[3], undelivered = r[3] - 1, undelivered + 1 end
    if r[3] > COUNT then r[3] = 0 end -- a count that does not read, as salvage has it: '%d' would wrap it
    redis.call('ZREM', K_LEASE, seq)
    r[4], r[5] = '', arg
    putrec(seq, r)
    redis.call('ZADD', K_DEAD, seq, seq)
    dead = dead + 1
  end
end

-- A receipt settles only its live delivery, once: a stale receipt of a
-- message fails alone, wherever it stands, and a second receipt of the
-- delivery already settled in this call fails.
local i, done = 8, {}
while i <= #ARGV do
  local seq, r
  if mode == 'r' then
    seq = ARGV[i]
    if not done[seq] then r = fence(seq, ARGV[i + 1]) end
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
drop(g[1], g[2], g[3], g[4], true)
count('nacked', nacked)
count('dead', dead)
-- The lease of a corrupt body, or of a released one, counted a delivery
-- ('#d') no consumer got.
-- A '#d' that is no number (garbled by hand) is left: every dequeue reads
-- it as none and writes it anew; an error here would come after the
-- dead-lettering.
if undelivered > 0 then
  local r = redis.pcall('HINCRBY', K_MSG, '#d', -undelivered)
  if type(r) == 'table' and not string.find(r.err, 'not an integer', 1, true) then return r end
end
wake()
return codes
