-- ack1: acks by receipt (a lone Ack, or concurrent Acks gathered), with
-- the one-message layout of arguments: ARGV[1] = now (µs), ARGV[2] =
-- DedupWindow (µs), then a pair per receipt from ARGV[3]: seq, lease
-- token. The fence and the removal, with no table built for one receipt;
-- a message a producer named goes through drop, whose lists are then
-- made whole, for its stamp and count. Returns, for one receipt, 0 acked
-- or 1 lease lost, as settle does; for more, one character per receipt
-- in their order, '0' or '1' (a string costs the server less to reply
-- than a table), or -3, "call settle", before anything is written, when
-- one of them names a message a producer named. The call carries only
-- the keys this touches: msg, lease, acked and stats. A receipt's ack
-- needs its record in msg and its lease in lease, so a lost one of those
-- keys fails it: only then, before anything is written, does the call
-- look for the keys' placeholders (intact), and report a lost one.
bindargs(nil, ARGV[1], '0', ARGV[2])
-- The fence (owner) wants the lease's deadline ahead. While no lease has
-- run out (none at or before now: ZCOUNT, whose integer reply is cheaper
-- than a score's), so has this one, if the message is leased at all:
-- that the ZREM's count tells, before anything else is written for it (a
-- producer's id, whose removal goes through drop, reads the deadline).
if #ARGV == 4 then
  local seq = ARGV[3]
  local raw = redis.call('HGET', K_MSG, seq)
  if not raw then return intact() or 1 end
  local assumed = redis.call('ZCOUNT', K_LEASE, '-inf', NOW) == 0
  local dl = NONE
  if not assumed then dl = redis.call('ZSCORE', K_LEASE, seq) end
  local id, pid = owner(raw, dl, ARGV[4])
  if not id then return intact() or 1 end
  if pid then
    if assumed and not redis.call('ZSCORE', K_LEASE, seq) then return intact() or 1 end
    local stamps = nil
    if window > 0 then stamps = {NOW, id} end
    return drop({seq}, {seq, 'b' .. seq, 'i' .. id}, stamps, 1, true) or 0
  end
  if redis.call('ZREM', K_LEASE, seq) == 0 then return intact() or 1 end
  redis.call('HDEL', K_MSG, seq, 'b' .. seq, 'i' .. id)
  return 0
end
-- Gathered: the records in one HMGET; every owner checked before the
-- first write, so that a producer's id sends the whole call to settle
-- with nothing written; then a ZREM per message (its count is the fence,
-- as above; a message named twice is acked by the first receipt of its
-- live delivery, the other fails) and one HDEL for all.
local n = (#ARGV - 2) / 2
local seqs = {}
for i = 1, n do seqs[i] = ARGV[1 + 2 * i] end
local raws = redis.call('HMGET', K_MSG, unpack(seqs))
local assumed = redis.call('ZCOUNT', K_LEASE, '-inf', NOW) == 0
local ids = {}
for i = 1, n do
  local dl = NONE
  if raws[i] and not assumed then dl = redis.call('ZSCORE', K_LEASE, seqs[i]) end
  local id, pid = owner(raws[i], dl, ARGV[2 + 2 * i])
  if pid then return -3 end
  ids[i] = id or false
end
local codes, fields = {}, {}
for i = 1, n do
  local seq, id = seqs[i], ids[i]
  if id and redis.call('ZREM', K_LEASE, seq) == 1 then
    codes[i] = '0'
    local f = #fields
    fields[f + 1], fields[f + 2], fields[f + 3] = seq, 'b' .. seq, 'i' .. id
  else
    codes[i] = '1'
  end
end
if #fields == 0 then -- nothing acked, nothing written: a lost key may be why (intact)
  local bad = intact()
  if bad then return bad end
end
if #fields > 0 then many('HDEL', K_MSG, fields) end
return table.concat(codes)
