package queue

// damaged reports whether a salvaging Open found anything lost: damaged
// log entries, a log that ends before the snapshot or starts after what it
// needs, or a damaged snapshot.
func (r Recovery) damaged() bool {
	return len(r.Log.Salvaged) > 0 || r.LostBefore != 0 || r.SnapshotLost.Path != ""
}

// mustReach is the LSN the log must reach: the snapshot's, or that of the
// damaged snapshot a salvage set aside (its records were written), so that
// no LSN it reflects is ever given to a new record.
func (r Recovery) mustReach(snapLSN uint64) uint64 {
	return max(snapLSN, r.SnapshotLost.LSN)
}
