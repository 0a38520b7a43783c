-- lease1: lone Dequeues, one message each, with the one-message layout
-- of arguments: ARGV[1] = now (µs), ARGV[2] = MaxDeliveries, ARGV[3] =
-- lease deadline (µs), ARGV[4..] = a fresh random lease token per
-- message. The call carries msg, ready, delayed and lease. One message:
-- see leaseone (common.lua), which returns a leased message as the
-- string seq ':' deliveries ':' body; gathered ones: see leasemany, which
-- returns dequeue's reply. Either returns {-3}, "call dequeue", for a
-- message to bury or kill, with nothing leased.
bindargs(nil, ARGV[1], ARGV[2], '0')
if #ARGV == 4 then return leaseone(ARGV[3], ARGV[4], false) end
do -- leaseone tells lost keys from its commands' replies; leasemany looks first (intact)
  local bad = intact()
  if bad then return bad end
end
return leasemany(ARGV, ARGV[3], #ARGV - 3, 3, false)
