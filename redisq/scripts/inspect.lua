-- inspect (read only): ARGV[5] = 'dead' with ARGV[6] = from seq and
-- ARGV[7] = max: {seq, info, body, ...} of dead letters in seq order; or
-- 'stats': {ready, delayed, in flight, dead, dedup ids, oldest body or
-- '' (none, or its body is missing), oldest seq or 0, counters...}.
if ARGV[5] == 'dead' then
  local out = {}
  local seqs = redis.call('ZRANGEBYSCORE', K_DEAD, ARGV[6], '+inf', 'LIMIT', 0, tonumber(ARGV[7]))
  for _, seq in ipairs(seqs) do
    out[#out + 1] = seq
    local got = redis.call('HMGET', K_MSG, seq, 'b' .. seq)
    out[#out + 1] = got[1]
    out[#out + 1] = got[2]
  end
  return out
end
-- A counter this reply reads, of stats or msg's count of deliveries
-- ('#d'), that is no count (written by hand) refuses the stats with an
-- error naming its key and field (checks.lua), rather than fail on it;
-- so does the sequence counter seq, a string key, the count of every
-- message enqueued.
local enqueued
do
  local bad = need({8}) or checks({2}, CALLKEYS, TYPES, {[2] = {'#d'}})
  if bad then return bad end
  enqueued = redis.call('GET', K_SEQ) or '0'
  if not iscount(enqueued) then
    return nocount(K_SEQ, enqueued, seqmend())
  end
  enqueued = tonumber(enqueued)
end
-- The oldest live message that is not dead: the lowest seq among the
-- ready, delayed and leased ones (the last two scanned up to 1000).
local oldest = nil
local function consider(seq)
  if seq and seq ~= KEEP and (not oldest or tonumber(seq) < oldest) then oldest = tonumber(seq) end
end
local r = redis.call('ZRANGE', K_READY, 0, 0)
consider(r[1])
r = redis.call('ZRANGEBYSCORE', K_READY, FRESH, '+inf', 'LIMIT', 0, 1)
consider(r[1])
for _, key in ipairs({K_DELAYED, K_LEASE}) do
  for _, seq in ipairs(redis.call('ZRANGE', key, 0, 999)) do consider(seq) end
end
local body = ''
if oldest then body = redis.call('HGET', K_MSG, 'b' .. string.format('%.0f', oldest)) or '' end
local acked = 0
if window > 0 then acked = redis.call('ZCOUNT', K_ACKED, string.format('%.0f', now - window), '+inf') end
local counters = redis.call('HGETALL', K_STATS)
local pids = tonumber(redis.call('HGET', K_STATS, 'pids') or '0')
-- Delayed messages whose time has come count as ready, as the embedded
-- queue counts them, though no dequeue or housekeeping promoted them yet.
local due = redis.call('ZCOUNT', K_DELAYED, '-inf', NOW)
local out = {card(K_READY) + due, redis.call('ZCARD', K_DELAYED) - due, card(K_LEASE),
  redis.call('ZCARD', K_DEAD), pids + acked, body, oldest or 0}
for _, v in ipairs(counters) do out[#out + 1] = v end
-- The counters no operation writes (see common.lua): every message ever
-- enqueued is live (ready, delayed, in flight, dead), acked or purged.
local purged = tonumber(redis.call('HGET', K_STATS, 'purged') or '0')
local live = out[1] + out[2] + out[3] + out[4]
out[#out + 1] = 'enqueued'
out[#out + 1] = enqueued
out[#out + 1] = 'delivered'
out[#out + 1] = tonumber(redis.call('HGET', K_MSG, '#d') or '0')
out[#out + 1] = 'acked'
out[#out + 1] = enqueued - live - purged
return out
