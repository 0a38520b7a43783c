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
