// Package index holds walq's in-memory indexes: the messages that the log
// cursor no longer accounts for (ready again, delayed, leased, dead), the
// producer-id dedup set, and the sorted index used by sorted queues.
//
// # What is in memory
//
// A message that was enqueued and never delivered has no entry here at all:
// it is an enqueue record after the queue's log cursor. An Entry exists only
// for a message that was delivered at least once, is delayed, or is dead,
// and it holds metadata only (ids, times, counts, the LSN of the record that
// holds the payload), never the payload. Memory therefore grows with the
// number of such exceptions and with producer-given ids, not with payload
// bytes.
//
// # Snapshots
//
// Every ordered structure is a github.com/google/btree BTreeG of values, so
// Clone is a constant-time copy-on-write snapshot: the queue clones under
// its lock and encodes the clone without it. The one exception is the
// table's entries by Seq: a window of fixed-size chunks indexed by a Seq's
// offset (Get, Put and Delete in constant time), with a btree for the few
// entries far behind the window. Its snapshot copies the chunk pointers,
// one per 32 Seqs of the window, and the chunks are copy-on-write.
//
// The table's orders by lease deadline, payload LSN and enqueue time are
// never cloned (a snapshot holds entries, not orders). Their keys mostly
// arrive in increasing order and leave oldest first, so each is a sorted
// slice appended to in constant time, with a btree for the keys that
// arrive out of order (runSet).
//
// # Concurrency
//
// Nothing here is safe for concurrent mutation. The owner (a queue) guards
// each structure with its own mutex. A clone may be read by another
// goroutine while the original keeps changing.
package index
