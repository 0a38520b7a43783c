-- enqueue: ARGV[5] = mode, ARGV[6] = n, then per message: id, producer
-- (0/1), due (µs, 0 = now), body. Generated ids are random and never
-- checked. Mode 'all' (one EnqueueBatch): all producer ids are checked
-- before anything is written, and a duplicate refuses the whole batch.
-- Mode 'each' (concurrent Enqueues gathered into one call): a duplicate
-- is left out and the others are enqueued. Returns a table of one code
-- per message: 1 enqueued, 0 left out as a duplicate. Up to 128
-- messages, all with generated ids and ready at once, go to enqueue1
-- (enqueue1.lua) instead; a call of enqueue that carries them all the
-- same enqueues them below, as any others.
-- Keys of the wrong type (see need) are checked before the first write.
-- The first enqueue of a queue takes back its seq when keep fails (lease
-- is checked by nothing else). A call forgets stamps only after every
-- check, so one refused on a key of the wrong type leaves them to the
-- handles with longer windows.
-- A handle's window is its own: it refuses an id whose ack (or purge)
-- it or another handle with a window stamped at now - window or later,
-- and forgets up to 128 stamps older than that per call. A handle
-- without a window reads no stamp and removes none but those of the ids
-- it enqueues anew (their earlier message's ack no longer stands).
local old -- the stamps past the window; the read checks the stamps key
if window > 0 then
  old = redis.call('ZRANGEBYSCORE', K_ACKED, '-inf', '(' .. string.format(INT, now - window), 'LIMIT', 0, 128)
end
local n = tonumber(ARGV[6])
local each = ARGV[5] == 'each'
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
      if seen[id] or live[j] or (at[j] and tonumber(at[j]) >= now - window) then
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
do -- stats only counts producer ids; with a window, the read of the old stamps checked their key
  local list = ENQ_ALL
  if #fresh > 0 then
    list = ENQ_IDS
    if window > 0 then list = {2, 3, 4, 8} end
  end
  local bad = need(list)
  if bad then return bad end
end
if m > 0 then
  seq = redis.pcall('INCRBY', K_SEQ, m)
  if type(seq) ~= 'number' then return seqerr(K_SEQ, seq, seqmend()) end
  seq = seq - m
  if seq == 0 then
    local bad = newcount()
    if bad then
      redis.call('INCRBY', K_SEQ, -m)
      return bad
    end
  end
end
if old and #old > 0 then many('ZREM', K_ACKED, old) end
for i = 0, n - 1 do
  if skip[i] then
    codes[#codes + 1] = 0
  else
    local b = 7 + i * 4
    local id, p, due = ARGV[b], ARGV[b + 1], 0
    if ARGV[b + 2] ~= '0' then due = tonumber(ARGV[b + 2]) end
    seq = seq + 1
    local f, sq = #fields, string.format(INT, seq)
    fields[f + 1], fields[f + 2] = sq, p .. string.format(':0::%d:', #id) .. id
    fields[f + 3], fields[f + 4] = 'b' .. sq, ARGV[b + 3]
    fields[f + 5], fields[f + 6] = 'i' .. id, sq
    if due > now then
      if not soonest or due < soonest then soonest = due end
      delayed[#delayed + 1] = ARGV[b + 2]; delayed[#delayed + 1] = sq
    else
      ready[#ready + 1] = string.format(INT, FRESH + seq); ready[#ready + 1] = sq
      fresh_ready = true
    end
    codes[#codes + 1] = 1
  end
end
-- With a message ready, '#q' goes with the messages' fields, all of them
-- new (see waiting in common.lua): one more added means it was absent.
if fresh_ready then fields[#fields + 1], fields[#fields + 2] = '#q', '1' end
if m > 0 and many('HSET', K_MSG, fields) > 3 * m then publish('r') end
if #fresh > 0 then many('ZREM', K_ACKED, fresh) end
if #ready > 0 then many('ZADD', K_READY, ready) end
if soonest then
  earlier(K_DELAYED, soonest)
  lower_w(soonest)
  many('ZADD', K_DELAYED, delayed)
end
count('pids', #fresh)
wake()
return codes
