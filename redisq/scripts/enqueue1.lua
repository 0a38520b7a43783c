-- enqueue1: messages with generated ids, ready at once (a lone Enqueue,
-- or up to 128 of them gathered or in a batch), with the one-message
-- layout of arguments: a pair per message, id and body; with a window
-- (enqueue1w, the same code, which carries acked) ARGV[1] = now (µs) and
-- ARGV[2] = DedupWindow (µs) come first, the pairs from ARGV[3]. Each
-- argument costs the server (see bindsome): without a window the time
-- serves nothing. Generated ids are
-- random and never checked, so no duplicate is looked for: straight to
-- the writes, with no table built for one message. Returns 1: all
-- enqueued. The call carries only the keys this touches: seq, msg, ready
-- and lease (keep), and with a window acked.
-- Keys of the wrong type (see need): seq fails first, ready the first
-- write after it, msg the next, each undoing the writes before it; the
-- first enqueue of a queue takes back its seqs when keep fails. The
-- stamps past the window are forgotten (see enqueue.lua) after the
-- messages' writes, so a call refused on a key of the wrong type leaves
-- them to the handles with longer windows.
local at = 0 -- the first pair is ARGV[at + 1], ARGV[at + 2]
local old -- the stamps past the window; the read checks the stamps key
if K_ACKED then
  bindargs(nil, ARGV[1], '0', ARGV[2])
  at = 2
  if window > 0 then
    old = redis.call('ZRANGEBYSCORE', K_ACKED, '-inf', '(' .. string.format(INT, now - window), 'LIMIT', 0, 128)
  end
else
  bindargs(nil, '0', '0', '0')
end
if #ARGV > at + 2 then return enqueuemany(ARGV, at, old) end
local id = ARGV[at + 1]
local seq = redis.pcall('INCR', K_SEQ)
if type(seq) ~= 'number' then return seqerr(K_SEQ, seq, seqmend()) end
if seq == 1 then
  local bad = newcount()
  if bad then
    redis.call('DECR', K_SEQ)
    return bad
  end
end
local sq = string.format(INT, seq) -- exact, where seq .. '' turns 1e14 and above into floats
-- Four new fields when '#q' was absent (see waiting): the message's
-- three (a generated id is new) and '#q'.
-- The placeholder of ready goes with the message: added again, it tells
-- a ready set that lost it, or a queue a later layout marked (see
-- intact, which tells which). A msg hash that lost its own lost '#q'
-- too: the HGET that tells runs only when '#q' was added. lease, which
-- this does not write but at a queue's first enqueue, is not looked at.
local added = redis.pcall('ZADD', K_READY, string.format(INT, FRESH + seq), sq, 'inf', KEEP)
if type(added) == 'table' then
  redis.call('DECR', K_SEQ)
  return added
end
if added == 2 then
  redis.call('ZREM', K_READY, sq, KEEP)
  redis.call('DECR', K_SEQ)
  return intact() or lostkey(K_READY)
end
added = redis.pcall('HSET', K_MSG, sq, freshrec(id), 'b' .. sq, ARGV[at + 2], 'i' .. id, sq, '#q', '1')
if type(added) == 'table' then
  redis.call('ZREM', K_READY, sq)
  redis.call('DECR', K_SEQ)
  return added
end
if added == 4 and redis.call('HGET', K_MSG, '') ~= KEEP then
  redis.call('HDEL', K_MSG, sq, 'b' .. sq, 'i' .. id, '#q')
  redis.call('ZREM', K_READY, sq)
  redis.call('DECR', K_SEQ)
  return intact() or lostkey(K_MSG)
end
if old and #old > 0 then many('ZREM', K_ACKED, old) end
if added == 4 then publish('r') end
return 1
