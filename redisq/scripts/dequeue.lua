-- dequeue: ARGV[5] = lease length (µs), ARGV[6] = max, ARGV[7..] = one
-- fresh random lease token per message. Promotes due delays, then leases
-- up to max ready messages: ready again (lowest seq first), then never
-- delivered (enqueue order). Returns {hint, seq, deliveries, body, ...}
-- where hint is the earliest delayed due time (-1 when none) if nothing
-- was leased.
promote(128)
local ackto, max = tonumber(ARGV[5]), tonumber(ARGV[6])
local seqs = redis.call('ZRANGE', K_READY, 0, max - 1)
local out = {-1}
if #seqs > 0 then earlier(K_LEASE, now + ackto) end
if #seqs > 0 then redis.call('ZREMRANGEBYRANK', K_READY, 0, #seqs - 1) end
local recs, deadlines = {}, {}
for i, seq in ipairs(seqs) do
  local r = getrec(seq)
  r[3] = r[3] + 1
  r[4] = ARGV[6 + i]
  recs[#recs + 1] = seq
  recs[#recs + 1] = cmsgpack.pack(r)
  deadlines[#deadlines + 1] = now + ackto
  deadlines[#deadlines + 1] = seq
  out[#out + 1] = seq
  out[#out + 1] = r[3]
  out[#out + 1] = false
end
if #seqs > 0 then
  many('HSET', K_INFO, recs)
  many('ZADD', K_LEASE, deadlines)
  for from = 1, #seqs, 1000 do
    local bodies = redis.call('HMGET', K_BODY, unpack(seqs, from, math.min(from + 999, #seqs)))
    for j, b in ipairs(bodies) do out[1 + (from + j - 1) * 3] = b end
  end
end
count('delivered', #seqs)
if #seqs == 0 then out[1] = first(K_DELAYED) end

wake()
return out
