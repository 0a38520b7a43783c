-- enqueue1: messages with generated ids, ready at once (a lone Enqueue,
-- or up to 128 of them gathered or in a batch), with the one-message
-- layout of arguments: a pair per message, id and body; with a window
-- (enqueue1w, the same code, which carries acked) ARGV[1] = now (µs) and
-- ARGV[2] = DedupWindow (µs) come first, the pairs from ARGV[3]. Each
-- argument costs the server (see bindsome): without a window the time
-- serves nothing. Generated ids are
-- random and never checked, so no duplicate is looked for: straight to
-- the writes, with no table built for one message (enqueueplain,
-- common.lua). Returns 1: all enqueued. The call carries only the keys
-- this touches: seq, msg, ready and lease (keep), and with a window acked.
-- Keys of the wrong type (see need): seq fails first, ready the first
-- write after it, msg the next, each undoing the writes before it; the
-- first enqueue of a queue takes back its seqs when keep fails. The
-- stamps past the window are forgotten (see enqueue.lua) after the
-- messages' writes, so a call refused on a key of the wrong type leaves
-- them to the handles with longer windows.
local at = 0 -- the first pair is ARGV[at + 1], ARGV[at + 2]
if K_ACKED then
  bindargs(nil, ARGV[1], '0', ARGV[2])
  at = 2
else
  bindargs(nil, '0', '0', '0')
end
return enqueueplain(ARGV, at, (#ARGV - at) / 2)
