-- dead: ARGV[5] = op (requeue, purge), ARGV[6] = id, or '' for every dead
-- letter, ARGV[7] = how many at most when ''. Returns how many it
-- changed; -1 when the id names no dead letter.
local op = ARGV[5]
local seqs
local g = gathering()
if ARGV[6] ~= '' then
  local seq = redis.call('HGET', K_MSG, 'i' .. ARGV[6])
  if not seq or not redis.call('ZSCORE', K_DEAD, seq) then return -1 end
  seqs = {seq}
else
  seqs = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[7]) - 1)
end
for _, seq in ipairs(seqs) do
  redis.call('ZREM', K_DEAD, seq)
  local r = getrec(seq)
  if op == 'purge' then
    forget(g, seq, r[1], r[2] == 1)
  else
    r[3], r[5] = 0, ''
    putrec(seq, r)
    ready(seq)
  end
end
if op == 'purge' then
  drop(g[1], g[2], g[3], g[4], false)
  count('purged', #seqs)
end
wake()
return #seqs
