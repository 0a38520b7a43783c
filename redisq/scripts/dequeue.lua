-- dequeue: ARGV[5] = lease length (µs), ARGV[6] = max, ARGV[7..] = one
-- fresh random lease token per message. Promotes due delays, then leases
-- up to max ready messages: ready again (lowest seq first), then never
-- delivered (enqueue order). Returns {hint, seq, deliveries, body, ...}
-- where hint is the earliest delayed due time (-1 when none) if nothing
-- was leased.
promote(128)
-- One message (a lone Dequeue): the same steps, with no table built but
-- the reply. A record is rewritten in place: its deliveries go up by
-- one and its token becomes this delivery's.
if ARGV[6] == '1' then
  local seq = redis.call('ZPOPMIN', K_READY)[1]
  if seq == KEEP then
    redis.call('ZADD', K_READY, 'inf', KEEP)
    seq = nil
  end
  if not seq then
    waiting()
    local hint = first(K_DELAYED)
    wake()
    return {hint}
  end
  local dl = now + ARGV[5]
  earlier(K_LEASE, dl)
  local got = redis.call('HMGET', K_MSG, seq, 'b' .. seq, '#d')
  local head, d, tail = string.match(got[1], '^(%d:)(%d+):%d*(:.*)$')
  d = d + 1
  redis.call('HSET', K_MSG, seq, head .. string.format('%d', d) .. ':' .. ARGV[7] .. tail,
    '#d', string.format('%d', (got[3] or 0) + 1))
  redis.call('ZADD', K_LEASE, dl, seq)
  wake()
  return {-1, seq, d, got[2]}
end
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
if #seqs < max then waiting() end
if #seqs == 0 then
  out[1] = first(K_DELAYED)
  wake()
  return out
end
earlier(K_LEASE, now + ackto)
local recs, deadlines = {}, {}
for from = 1, #seqs, 500 do
  local part = {unpack(seqs, from, math.min(from + 499, #seqs))}
  local fields = {}
  for j, seq in ipairs(part) do fields[2 * j - 1], fields[2 * j] = seq, 'b' .. seq end
  local got = redis.call('HMGET', K_MSG, unpack(fields))
  for j, seq in ipairs(part) do
    local i = from + j - 1
    local r = decode(got[2 * j - 1])
    r[3] = r[3] + 1
    r[4] = ARGV[6 + i]
    recs[#recs + 1] = seq
    recs[#recs + 1] = encode(r)
    deadlines[#deadlines + 1] = now + ackto
    deadlines[#deadlines + 1] = seq
    out[#out + 1] = seq
    out[#out + 1] = r[3]
    out[#out + 1] = got[2 * j]
  end
end
many('HSET', K_MSG, recs)
many('ZADD', K_LEASE, deadlines)
redis.call('HINCRBY', K_MSG, '#d', #seqs)
wake()
return out
