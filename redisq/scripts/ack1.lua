-- ack1: acks by receipt (a lone Ack, or concurrent Acks gathered), with
-- the one-message layout of arguments: ARGV[1] = now (µs), ARGV[2] =
-- DedupWindow (µs), then a pair per receipt from ARGV[3]: seq, lease
-- token. The fence and the removal, with no table built for one receipt
-- (ackone, common.lua); a message a producer named goes through drop,
-- whose lists are then made whole, for its stamp and count. Returns, for
-- one receipt, 0 acked or 1 lease lost, as settle does; for more
-- (ackmany), one character per receipt in their order, '0' or '1' (a
-- string costs the server less to reply than a table), or -3, "call
-- settle", before anything is written, when one of them names a message
-- a producer named. The call carries only the keys this touches: msg,
-- lease, acked and stats.
bindargs(nil, ARGV[1], '0', ARGV[2])
if #ARGV == 4 then return ackone(ARGV[3], ARGV[4]) end
return ackmany(ARGV, 2, (#ARGV - 2) / 2)
