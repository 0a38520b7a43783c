package main

// The sorted workload drives walq's sorted queue (queue.OpenSorted), which
// no peer offers, in SyncAlways and SyncNever:
//
//  1. publish: sortedProducers goroutines publish N values spread over
//     sortedKeys keys, each value's sort key derived from its identity
//     (sortKeyOf), so that the order can be checked afterwards;
//  2. pull: one puller pulls batches of about sortedPull values and acks
//     them until every value came out, checking each payload and its sort
//     key, the count, and that batches come out in ascending order of their
//     smallest sort key.
//
// sys_walq_sorted.go drives the API.
const (
	sortedProducers = 16
	sortedKeys      = 1000
	sortedPull      = 100
)

// sortKeyOf is the sort key of message (producer, seq): a fixed scramble, so
// that sort order differs from publish order.
func sortKeyOf(producer int, seq uint64) int64 {
	x := uint64(producer)<<40 ^ seq
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return int64(x >> 1)
}

// groupKeyOf is the batching key of message (producer, seq).
func groupKeyOf(producer int, seq uint64) int {
	return int((uint64(producer)*1_000_003 + seq) % sortedKeys)
}
