-- housekeep: ARGV[5] = 1 to end expired leases, ARGV[6] = limit.
-- Promotes due delays, ends leases whose deadline has passed (ready
-- again, or dead at MaxDeliveries; dead, before any other write for it,
-- when its record does not parse: see bury). Returns {leases ended, the
-- time to look at leases again, earliest delayed due time}, -1 for none. The
-- time to look again is the earliest lease deadline, or the announced
-- one ('#t', see announce) when that is earlier and still ahead: a lease
-- set later may have relied on it and not been announced. A '#t' that
-- has passed is removed.
do
  local bad = need(HOUSEKEEP)
  if bad then return bad end
end
local state = redis.call('HMGET', K_MSG, '#w', '#t')
local _, delayed = promote(tonumber(ARGV[6]), tonumber(state[1]))
local n, expired = 0, 0
if ARGV[5] == '1' then
  local due = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', NOW, 'LIMIT', 0, tonumber(ARGV[6]))
  for _, seq in ipairs(due) do
    local raw = redis.call('HGET', K_MSG, seq)
    local r = decode(raw)
    if not r then
      bury(seq, raw, redis.call('HGET', K_MSG, 'b' .. seq), raw and 'unreadable' or 'missing')
    elseif giveback(seq, r, 0, 'ack timeout') then
      expired = expired + 1
    end
    n = n + 1
  end
end
count('expired', expired)
wake()
local lease, t = first(K_LEASE), tonumber(state[2])
if t and t > now and (lease < 0 or t < lease) then lease = t end
-- Once '#t' has passed for this pass, it no longer arms this housekeeper:
-- removed, it makes the next lease announce itself. Kept, a lease taken
-- by a dequeue whose clock still had it ahead would go unannounced.
if t and t <= now then redis.call('HDEL', K_MSG, '#t') end
return {n, lease, delayed}
