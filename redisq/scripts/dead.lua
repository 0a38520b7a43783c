-- dead: ARGV[5] = op (requeue, purge), ARGV[6] = id, or '' for every dead
-- letter, ARGV[7] = how many at most when ''. Returns how many it
-- changed; -1 when the id names no dead letter.
do
  local bad = need(DEADOPS)
  if bad then return bad end
end
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
-- A record that does not parse is salvaged (see bury) before the first
-- write for its message: requeued, it is delivered again under its id.
-- A letter reached by an id its record lost (id unknown) takes that id:
-- the id's index names it, and a purge must remove that index, or the
-- id would be refused for good.
for _, seq in ipairs(seqs) do
  local raw = redis.call('HGET', K_MSG, seq)
  local r = decode(raw) or salvage(seq, raw, redis.call('HGET', K_MSG, 'b' .. seq))
  if r[1] == '' then r[1] = ARGV[6] end
  redis.call('ZREM', K_DEAD, seq)
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
