-- dequeue: ARGV[5] = lease deadline (µs), ARGV[6] = max, ARGV[7..] = one
-- fresh random lease token per message. Promotes due delays when '#w'
-- says one may be due (or nothing is ready), then leases up to max ready
-- messages: ready again (lowest seq first), then never delivered
-- (enqueue order); a popped message that had MaxDeliveries goes to the
-- dead-letter set instead (atlimit). Returns {hint, seq, deliveries,
-- body, ...} where hint is the earliest delayed due time (-1 when none)
-- if nothing was leased, and -2, "call again", whenever the call stopped
-- at BURIES burials and kills.

-- One message: see leaseone (common.lua), which lease1 runs too.
if ARGV[6] == '1' then return leaseone(ARGV[5], ARGV[7], true) end
-- Many messages (DequeueBatch, lone Dequeues gathered): the same steps
-- for all. '#w', '#t' and '#d' come with the first records read (one
-- HMGET); when a delayed message may be due, the popped messages go back
-- and are popped again after the promotion. Each record is rewritten in
-- place, as by a lone Dequeue; k counts the messages leased, whose
-- tokens are taken in order. Messages that cannot be leased are buried,
-- those at the limit killed, and as many more popped.
-- Keys of the wrong type cost a batch no check up front, as a lone
-- dequeue: msg fails the first read after the pop and lease the first
-- write of the leases (before the records'), each undone by putting the
-- messages back (after a burial, whose check covered lease, that write
-- cannot fail) and announcing what was promoted, as a lone dequeue does.
local max = tonumber(ARGV[6])
local seqs, popped = popmany(max)
local promoted, hint = false, -1
if #seqs == 0 then
  local n
  n, hint = promote(128, tonumber(redis.call('HGET', K_MSG, '#w')))
  promoted = true
  if n > 0 then seqs, popped = popmany(max) end
end
local out = {-1}
local got, state, to = nil, {}, math.min(500, #seqs)
if #seqs > 0 then
  got = records(seqs, 1, to, true, true)
  if got.err then
    putback(popped)
    wake()
    return got
  end
  local w = tonumber(got[2 * to + 1])
  local bad = not promoted and (not w or w <= now) and need(DELAYED)
  if bad then
    putback(popped)
    wake()
    return bad
  end
  if not promoted and (not w or w <= now) and promote(128, w) > 0 then
    putback(popped)
    seqs, popped = popmany(max)
    to = math.min(500, #seqs)
    got = records(seqs, 1, to, true)
  end
  state = {got[2 * to + 2], got[2 * to + 3]}
end
local dls = ARGV[5]
local dl = dls + 0
local recs, deadlines = {}, {}
local k, buried = 0, 0
while #seqs > 0 do
  local was = buried
  for from = 1, #seqs, 500 do
    to = math.min(from + 499, #seqs)
    if not got then got = records(seqs, from, to, false) end
    for j = from, to do
      local seq, raw, body = seqs[j], got[2 * (j - from) + 1], got[2 * (j - from) + 2]
      local head, d, tail = leasable(raw, body)
      if head and not atlimit(d) then
        d = d + 1
        k = k + 1
        local r, o = #recs, #out
        recs[r + 1], recs[r + 2] = seq, head .. string.format(INT, d) .. ':' .. ARGV[6 + k] .. tail
        deadlines[r + 1], deadlines[r + 2] = dls, seq
        out[o + 1], out[o + 2], out[o + 3] = seq, d, body
      else
        if buried == 0 then -- nothing but the pop is written yet
          local bad = need(BURY)
          if bad then
            putback(popped)
            wake()
            return bad
          end
        end
        if head then killAtLimit(seq, raw, d) else bury(seq, raw, body, d) end
        buried = buried + 1
      end
    end
    got = nil
  end
  seqs = {}
  if buried >= BURIES then
    woke = true -- the consumers left without a message look again
    hint = -2 -- and the caller calls again for those it leased none for
  elseif buried > was then
    seqs = popmany(max - k)
    if #seqs == 0 then -- nothing ready: promote, as above
      local n
      n, hint = promote(128, nil)
      if n > 0 then seqs = popmany(max - k) end
    end
  end
end
if k < max then waiting() end
if k == 0 or hint == -2 then out[1] = hint end
if k == 0 then
  wake()
  return out
end
recs[#recs + 1], recs[#recs + 2] = '#d', string.format(INT, (tonumber(state[2]) or 0) + k)
local first = math.min(#deadlines, 1000)
if buried == 0 then
  local bad = redis.pcall('ZADD', K_LEASE, unpack(deadlines, 1, first))
  if type(bad) == 'table' then
    putback(popped)
    wake()
    return bad
  end
else
  redis.call('ZADD', K_LEASE, unpack(deadlines, 1, first))
end
for i = first + 1, #deadlines, 1000 do
  redis.call('ZADD', K_LEASE, unpack(deadlines, i, math.min(i + 999, #deadlines)))
end
-- announced once the deadlines are written: a lease that failed set none
if announce(dl, state[1]) then recs[#recs + 1], recs[#recs + 2] = '#t', dls end
many('HSET', K_MSG, with_w(recs))
wake()
return out
