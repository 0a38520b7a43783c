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
-- Many messages (DequeueBatch, lone Dequeues gathered after lease1 left
-- them to it): leasemany (common.lua), the same steps for all. '#w',
-- '#t' and '#d' come with the first records read (one HMGET); when a
-- delayed message may be due, the popped messages go back
-- and are popped again after the promotion. Each record is rewritten in
-- place, as by a lone Dequeue; k counts the messages leased, whose
-- tokens are taken in order. Messages that cannot be leased are buried,
-- those at the limit killed, and as many more popped.
-- Keys of the wrong type cost a batch no check up front, as a lone
-- dequeue: msg fails the first read after the pop and lease the first
-- write of the leases (before the records'), each undone by putting the
-- messages back (after a burial, whose check covered lease, that write
-- cannot fail) and announcing what was promoted, as a lone dequeue does.
return leasemany(ARGV, ARGV[5], tonumber(ARGV[6]), 6, true)
