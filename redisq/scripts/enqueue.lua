-- enqueue: ARGV[5] = n, then per message: id, producer (0/1), due (µs,
-- 0 = now), body. All ids are checked before anything is written: a
-- duplicate refuses the whole batch.
if window > 0 then
  local old = redis.call('ZRANGEBYSCORE', K_ACKED, '-inf', now - window, 'LIMIT', 0, 128)
  for _, id in ipairs(old) do redis.call('ZREM', K_ACKED, id) end
end
local n = tonumber(ARGV[5])
local seen = {}
for i = 0, n - 1 do
  local id = ARGV[6 + i * 4]
  local dup = seen[id] or redis.call('HEXISTS', K_BYID, id) == 1
  if not dup and window > 0 then
    local at = redis.call('ZSCORE', K_ACKED, id)
    dup = at and tonumber(at) > now - window
  end
  if dup then return redis.error_reply('DUPLICATE ' .. id) end
  seen[id] = true
end
local seqs, pids = {}, 0
local bodies, recs, byid, ready, delayed, unstamp = {}, {}, {}, {}, {}, {}
local first = redis.call('INCRBY', K_SEQ, n) - n
for i = 0, n - 1 do
  local b = 6 + i * 4
  local id, p, due = ARGV[b], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  local seq = first + i + 1
  table.insert(bodies, seq); table.insert(bodies, ARGV[b + 3])
  table.insert(recs, seq); table.insert(recs, cmsgpack.pack({id, p, 0, '', ''}))
  table.insert(byid, id); table.insert(byid, seq)
  if p == 1 then
    pids = pids + 1
    if window > 0 then table.insert(unstamp, id) end
  end
  if due > now then
    earlier(K_DELAYED, due)
    table.insert(delayed, due); table.insert(delayed, seq)
  else
    table.insert(ready, FRESH + seq); table.insert(ready, seq)
    woke = true
  end
  seqs[#seqs + 1] = seq
end
many('HSET', K_BODY, bodies)
many('HSET', K_INFO, recs)
many('HSET', K_BYID, byid)
if #unstamp > 0 then many('ZREM', K_ACKED, unstamp) end
if #ready > 0 then many('ZADD', K_READY, ready) end
if #delayed > 0 then many('ZADD', K_DELAYED, delayed) end
count('enqueued', n)
count('pids', pids)
wake()
return seqs
