-- The operations of the sorted queue (the head is sorted.lua).
local result
if op == 'publish' then
  -- 8 key, 9 sortpart, 10 body
  local seq = redis.call('INCR', K_SEQ)
  redis.call('HSET', K_VAL, seq, ARGV[10])
  redis.call('HSET', K_VINFO, seq, 0)
  redis.call('ZADD', K_PEND, 0, keyprefix(ARGV[8]) .. ARGV[9] .. seq8(seq))
  redis.call('HINCRBY', K_STATS, 'published', 1)
  place(ARGV[8])
  result = seq
elseif op == 'pull' then
  -- 8 max, 9 bound ('' for none), 10.. lease tokens. Returns {batches,
  -- earliest hold end or -1, sortpart of the first key or ''}.
  release()
  local max, bound = tonumber(ARGV[8]), ARGV[9]
  local out, n = {}, 0
  while n < max do
    local m = redis.call('ZRANGE', K_ORDER, 0, 0)[1]
    if not m or (bound ~= '' and bytesGreater(string.sub(m, 1, #bound), bound)) then break end
    local key = keyOf(m)
    local p = keyprefix(key)
    local members = redis.call('ZRANGEBYLEX', K_PEND, '[' .. p, '(' .. prefixEnd(p))
    unplace(key)
    zremAll(K_PEND, members)
    local tok = ARGV[10 + #out]
    local vals = {}
    for _, pm in ipairs(members) do
      local seq = unseq8(string.sub(pm, -8))
      vals[#vals + 1] = {seq, delivered(seq), redis.call('HGET', K_VAL, seq)}
    end
    if #out == 0 then earlier(K_BDUE, now + ackto) end
    redis.call('HSET', K_BATCH, tok, cmsgpack.pack({key, members, now}))
    redis.call('ZADD', K_BDUE, now + ackto, tok)
    redis.call('HINCRBY', K_FLIGHT, key, 1)
    redis.call('HINCRBY', K_STATS, 'pulled', 1)
    redis.call('HINCRBY', K_STATS, 'leased', #members)
    out[#out + 1] = {tok, key, vals}
    n = n + #members
  end
  local head = redis.call('ZRANGE', K_ORDER, 0, 0)[1]
  if head then
    if fixed then head = string.sub(head, 1, 8) else head = '' end
  else
    head = ''
  end
  result = {out, first(K_HOLD), head}
elseif op == 'ack' or op == 'nack' or op == 'extend' or op == 'dead' then
  -- 8 lease token, 9 argument. Returns 0, or 1 when the lease is lost.
  local tok = ARGV[8]
  local b = fence(tok)
  if not b then return 1 end
  if op == 'ack' then
    drop(tok, b)
    for _, m in ipairs(b[2]) do
      local seq = unseq8(string.sub(m, -8))
      redis.call('HDEL', K_VAL, seq)
      redis.call('HDEL', K_VINFO, seq)
    end
    redis.call('HINCRBY', K_STATS, 'acked', 1)
    place(b[1])
  elseif op == 'nack' then
    giveback(tok, b, tonumber(ARGV[9]), 'nacked')
  elseif op == 'extend' then
    earlier(K_BDUE, now + tonumber(ARGV[9]))
    redis.call('ZADD', K_BDUE, now + tonumber(ARGV[9]), tok)
  else
    drop(tok, b)
    for _, m in ipairs(b[2]) do toDead(unseq8(string.sub(m, -8)), ARGV[9]) end
    place(b[1])
  end
  result = 0
elseif op == 'housekeep' then
  -- 8 end expired leases (1/0). Returns {batches returned, earliest
  -- lease deadline, earliest hold end}.
  release()
  local n = 0
  if ARGV[8] == '1' then
    local due = redis.call('ZRANGEBYSCORE', K_BDUE, '-inf', now, 'LIMIT', 0, 1000)
    for _, tok in ipairs(due) do
      -- A batch record that is gone or does not unpack names no values
      -- to give back: its lease alone ends, so that it stops no pass.
      local ok, b = pcall(cmsgpack.unpack, redis.call('HGET', K_BATCH, tok) or '')
      if ok and type(b) == 'table' and type(b[1]) == 'string' and type(b[2]) == 'table' then
        giveback(tok, b, 0, 'ack timeout')
      else
        redis.call('HDEL', K_BATCH, tok)
        redis.call('ZREM', K_BDUE, tok)
      end
      n = n + 1
    end
  end
  result = {n, first(K_BDUE), first(K_HOLD)}
elseif op == 'stats' then
  local c = redis.call('HMGET', K_STATS, 'published', 'pulled', 'acked', 'leased')
  result = {redis.call('ZCARD', K_PEND), redis.call('ZCARD', K_ORDER), redis.call('HLEN', K_BATCH),
    redis.call('ZCARD', K_DEAD), tonumber(c[1] or 0), tonumber(c[2] or 0), tonumber(c[3] or 0), tonumber(c[4] or 0)}
else
  return redis.error_reply('unknown operation ' .. op)
end
wake()
return result
