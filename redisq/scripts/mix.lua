-- mix: concurrent calls of different kinds of one handle in one call:
-- Acks by receipt (ack1), Enqueues of generated ids ready at once
-- (enqueue1), lone Dequeues (lease1), so that the server pays one call's
-- fixed cost for them all. ARGV[1] = now (µs), ARGV[2] = MaxDeliveries,
-- ARGV[3] = DedupWindow (µs), ARGV[4] = lease deadline (µs), ARGV[5] =
-- the number of receipts a, ARGV[6] = the number of messages e; then a
-- pair per receipt (seq, lease token), a pair per message (id, body),
-- and a fresh lease token per Dequeue, to the end. The call carries
-- every key those three touch: seq, msg, ready, delayed, lease, acked
-- and stats.
-- The parts run in a fixed order, acks, then enqueues, then leases (a
-- Dequeue may lease a message enqueued in the same call), each as its
-- own function runs it, with the arguments that function would get, and
-- each under pcall: an error in one part (a key of the wrong type) is
-- that part's reply, and the others run. Each part checks its keys
-- before its first write, or takes back what it wrote, as its own
-- function does, so a part that fails leaves the queue as it was.
-- Returns {acks, enqueues, leases}: each part's reply as its own
-- function's (ack1: a code or a string of codes, or -3; enqueue1: 1;
-- lease1: a leased message's string, or a table), its error, or 0 for a
-- part with nothing to do.
local a, e = tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {0, 0, 0}
if a > 0 then
  bindargs(nil, ARGV[1], '0', ARGV[3])
  if a == 1 then
    out[1] = caught(pcall(ackone, ARGV[7], ARGV[8]))
  else
    out[1] = caught(pcall(ackmany, ARGV, 6, a))
  end
end
local at = 6 + 2 * a -- the pairs of id and body start after ARGV[at]
if e > 0 then
  bindargs(nil, ARGV[1], '0', ARGV[3])
  out[2] = caught(pcall(enqueueplain, ARGV, at, e))
end
at = at + 2 * e -- the tokens start after ARGV[at]
local l = #ARGV - at
if l > 0 then
  bindargs(nil, ARGV[1], ARGV[2], '0')
  if l == 1 then
    out[3] = caught(pcall(leaseone, ARGV[4], ARGV[at + 1], false))
  else
    out[3] = caught(pcall(leasemany, ARGV, ARGV[4], l, at, false))
  end
end
return out
