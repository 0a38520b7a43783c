-- housekeep: ARGV[5] = 1 to end expired leases, ARGV[6] = limit.
-- Promotes due delays, ends leases whose deadline has passed (ready
-- again, or dead at MaxDeliveries). Returns {leases ended, earliest lease
-- deadline, earliest delayed due time}, -1 for none.
promote(tonumber(ARGV[6]))
local n, expired = 0, 0
if ARGV[5] == '1' then
  local due = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[6]))
  for _, seq in ipairs(due) do
    if giveback(seq, getrec(seq), 0, 'ack timeout') then expired = expired + 1 end
    n = n + 1
  end
end
count('expired', expired)
wake()
return {n, first(K_LEASE), first(K_DELAYED)}
