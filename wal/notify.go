package wal

// Written returns a channel closed once the group is written to its
// segment file (or failed): when WaitWritten would return. Unlike
// WaitWritten it does not mark the group urgent, so under SyncAlways the
// committer may still hold the write back while an fsync runs. A reader
// that wants to learn when records appended by others become readable
// selects on it without a goroutine per record.
func (c *Commit) Written() <-chan struct{} { return c.channel(stateWritten) }
