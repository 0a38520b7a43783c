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
for i = 0, n - 1 do
  local b = 6 + i * 4
  local id, p, due = ARGV[b], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  local seq = redis.call('INCR', K_SEQ)
  redis.call('HSET', K_BODY, seq, ARGV[b + 3])
  putrec(seq, {id, p, 0, '', ''})
  redis.call('HSET', K_BYID, id, seq)
  if p == 1 then
    pids = pids + 1
    if window > 0 then redis.call('ZREM', K_ACKED, id) end
  end
  if due > now then
    earlier(K_DELAYED, due)
    redis.call('ZADD', K_DELAYED, due, seq)
  else
    redis.call('ZADD', K_READY, FRESH + seq, seq)
    woke = true
  end
  seqs[#seqs + 1] = seq
end
count('enqueued', n)
count('pids', pids)
wake()
return seqs
