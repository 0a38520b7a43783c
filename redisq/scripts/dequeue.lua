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
for i, seq in ipairs(seqs) do
  redis.call('ZREM', K_READY, seq)
  local r = getrec(seq)
  r[3] = r[3] + 1
  r[4] = ARGV[6 + i]
  putrec(seq, r)
  redis.call('ZADD', K_LEASE, now + ackto, seq)
  out[#out + 1] = seq
  out[#out + 1] = r[3]
  out[#out + 1] = redis.call('HGET', K_BODY, seq)
end
count('delivered', #seqs)
if #seqs == 0 then out[1] = first(K_DELAYED) end

wake()
return out
