-- enqueue: ARGV[5] = n, then per message: id, producer (0/1), due (µs,
-- 0 = now), body. All producer ids are checked before anything is
-- written: a duplicate refuses the whole batch. Generated ids are random
-- and never checked.
if window > 0 then
  local old = redis.call('ZRANGEBYSCORE', K_ACKED, '-inf', now - window, 'LIMIT', 0, 128)
  if #old > 0 then many('ZREM', K_ACKED, old) end
end
local n = tonumber(ARGV[5])
local given = {}
for i = 0, n - 1 do
  if ARGV[7 + i * 4] == '1' then given[#given + 1] = ARGV[6 + i * 4] end
end
if #given > 0 then
  local seen = {}
  for from = 1, #given, 1000 do
    local part = {unpack(given, from, math.min(from + 999, #given))}
    local live = redis.call('HMGET', K_BYID, unpack(part))
    local at = {}
    if window > 0 then at = redis.call('ZMSCORE', K_ACKED, unpack(part)) end
    for j, id in ipairs(part) do
      if seen[id] or live[j] or (at[j] and tonumber(at[j]) > now - window) then
        return redis.error_reply('DUPLICATE ' .. id)
      end
      seen[id] = true
    end
  end
end
local seqs = {}
local bodies, recs, byid, ready, delayed = {}, {}, {}, {}, {}
local first = redis.call('INCRBY', K_SEQ, n) - n
if first == 0 then keep() end
for i = 0, n - 1 do
  local b = 6 + i * 4
  local id, p, due = ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2])
  local seq = first + i + 1
  bodies[#bodies + 1] = seq; bodies[#bodies + 1] = ARGV[b + 3]
  recs[#recs + 1] = seq; recs[#recs + 1] = p .. ':0::' .. #id .. ':' .. id
  byid[#byid + 1] = id; byid[#byid + 1] = seq
  if due > now then
    earlier(K_DELAYED, due)
    delayed[#delayed + 1] = due; delayed[#delayed + 1] = seq
  else
    ready[#ready + 1] = FRESH + seq; ready[#ready + 1] = seq
    woke = true
  end
  seqs[#seqs + 1] = seq
end
many('HSET', K_BODY, bodies)
many('HSET', K_INFO, recs)
many('HSET', K_BYID, byid)
if #given > 0 and window > 0 then many('ZREM', K_ACKED, given) end
if #ready > 0 then many('ZADD', K_READY, ready) end
if #delayed > 0 then many('ZADD', K_DELAYED, delayed) end
count('enqueued', n)
count('pids', #given)
wake()
return seqs
