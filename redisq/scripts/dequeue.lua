-- dequeue: ARGV[5] = lease length (µs), ARGV[6] = max, ARGV[7..] = one
-- fresh random lease token per message. Promotes due delays, then leases
-- up to max ready messages: ready again (lowest seq first), then never
-- delivered (enqueue order). Returns {hint, seq, deliveries, body, ...}
-- where hint is the earliest delayed due time (-1 when none) if nothing
-- was leased.
promote(128)
local ackto, max = tonumber(ARGV[5]), tonumber(ARGV[6])
local popped = redis.call('ZPOPMIN', K_READY, max)
local seqs = {}
for i = 1, #popped, 2 do
  if popped[i] == KEEP then
    redis.call('ZADD', K_READY, 'inf', KEEP)
  else
    seqs[#seqs + 1] = popped[i]
  end
end
local out = {-1}
if #seqs == 0 then
  out[1] = first(K_DELAYED)
  wake()
  return out
end
earlier(K_LEASE, now + ackto)
local recs, deadlines = {}, {}
for from = 1, #seqs, 1000 do
  local part = {unpack(seqs, from, math.min(from + 999, #seqs))}
  local raws = redis.call('HMGET', K_INFO, unpack(part))
  local bodies = redis.call('HMGET', K_BODY, unpack(part))
  for j, seq in ipairs(part) do
    local i = from + j - 1
    local r = decode(raws[j])
    r[3] = r[3] + 1
    r[4] = ARGV[6 + i]
    recs[#recs + 1] = seq
    recs[#recs + 1] = encode(r)
    deadlines[#deadlines + 1] = now + ackto
    deadlines[#deadlines + 1] = seq
    out[#out + 1] = seq
    out[#out + 1] = r[3]
    out[#out + 1] = bodies[j]
  end
end
many('HSET', K_INFO, recs)
many('ZADD', K_LEASE, deadlines)
count('delivered', #seqs)
wake()
return out
