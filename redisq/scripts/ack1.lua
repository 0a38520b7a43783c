-- ack1: one ack by receipt (a lone Ack), with the one-message layout of
-- arguments: ARGV[1] = now (µs), ARGV[2] = DedupWindow (µs), ARGV[3] =
-- seq, ARGV[4] = lease token. The fence and the removal, with no table
-- built; a message a producer named goes through drop, whose lists are
-- then made whole, for its stamp and count. Returns 0 acked, 1 lease
-- lost, as settle does. The call carries only the keys this touches:
-- msg, lease, acked and stats.
bindargs(nil, ARGV[1], '0', ARGV[2])
local seq = ARGV[3]
local raw = redis.call('HGET', K_MSG, seq)
if not raw then return 1 end
-- The fence (owner) wants the lease's deadline ahead. While no lease has
-- run out (none at or before now: ZCOUNT, whose integer reply is cheaper
-- than a score's), so has this one, if the message is leased at all:
-- that the ZREM's count tells, before anything else is written (a
-- producer's id, whose removal goes through drop, reads the deadline).
local assumed = redis.call('ZCOUNT', K_LEASE, '-inf', NOW) == 0
local dl = NONE
if not assumed then dl = redis.call('ZSCORE', K_LEASE, seq) end
local id, pid = owner(raw, dl, ARGV[4])
if not id then return 1 end
if pid then
  if assumed and not redis.call('ZSCORE', K_LEASE, seq) then return 1 end
  local stamps = nil
  if window > 0 then stamps = {NOW, id} end
  return drop({seq}, {seq, 'b' .. seq, 'i' .. id}, stamps, 1, true) or 0
end
if redis.call('ZREM', K_LEASE, seq) == 0 then return 1 end
redis.call('HDEL', K_MSG, seq, 'b' .. seq, 'i' .. id)
return 0
