-- lease1: one message (a lone Dequeue), with the one-message layout of
-- arguments: ARGV[1] = now (µs), ARGV[2] = MaxDeliveries, ARGV[3] = lease
-- deadline (µs), ARGV[4] = a fresh random lease token. The call carries
-- msg, ready, delayed and lease: see leaseone (common.lua), which
-- returns a leased message as the string seq ':' deliveries ':' body, and
-- {-3}, "call dequeue", for a message to bury or kill.
bindargs(nil, ARGV[1], ARGV[2], '0')
return leaseone(ARGV[3], ARGV[4], false)
