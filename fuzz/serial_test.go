package fuzz_test

import (
	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// settle makes everything the queue q (a *queue.Queue, *queue.Sorted or
// *queue.Windowed) has written durable, with a witness of it, so that a
// workload that settles after each call makes the same durable
// operations, at the same places, in every run of a seed. Without it,
// under SyncAlways, a call that returns once its records are written (a
// dequeue's or a pull's lease, an asynchronous call) leaves their fsync
// to the log, which makes it in the background or with the next call's
// records as timing has it; and the log writes a witness entry only if
// it stays idle for 2 ms after an fsync (wal/witness.go), which moves the
// later entries and the segment rolls.
//
// Two flushes: a witness the log wrote by itself before the first makes
// the first fsync it, and one the first wrote is fsynced by the second,
// so that either way the witness is written once and fsynced once.
func settle(q any) error {
	if err := testhook.FlushLog(q); err != nil {
		return err
	}
	return testhook.FlushLog(q)
}

// settlesEach reports whether a serial workload under mode settles after
// each call: under SyncAlways only. Under SyncNever a settle would fsync
// every call, leaving a crash one call's records to lose, where the
// workload's own states hold many calls' unsynced records, over several
// segments; the repair an Open makes of those is what a second crash
// must be tested in. Without background compaction and with each
// asynchronous call awaited, nothing fsyncs there but the workload's own
// Compact calls, the segment rolls and Close.
func settlesEach(serial bool, mode queue.SyncMode) bool {
	return serial && mode == queue.SyncAlways
}
