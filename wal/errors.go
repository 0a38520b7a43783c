package wal

import (
	"errors"
	"fmt"
)

// Errors returned by the package. Callers test for them with errors.Is: every
// error that concerns a place in the log wraps one of them with that place
// (segment file, byte offset, entry index or LSN).
var (
	// ErrClosed is returned when a Log or Reader is used after Close.
	ErrClosed = errors.New("wal: log closed")
	// ErrCorrupt is returned when an entry fails its framing, CRC, version
	// or LSN-continuity checks anywhere but in a torn tail.
	ErrCorrupt = errors.New("wal: corrupt entry")
	// ErrTooLarge is returned by Append when a record is longer than
	// Options.MaxRecordSize. It does not poison the Log.
	ErrTooLarge = errors.New("wal: record too large")
	// ErrNotFound is returned when an LSN is not in the log: truncated
	// away, not written yet, or lost to damage skipped under Salvage.
	ErrNotFound = errors.New("wal: record not in log")
	// ErrInvalidOptions is returned by Open when an option is out of range.
	ErrInvalidOptions = errors.New("wal: invalid options")
	// ErrReadOnly is returned by Append and TruncateFront on a Log opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("wal: log is read-only")
	// ErrForeign is returned by Open when the log directory holds a file
	// that walq never writes and that no repair may change: a tidwall/wal
	// NAME.END truncation marker, which tidwall/wal would finish by
	// removing the segments after it, or a NAME.START file without a valid
	// entry or whose first entry is not the log's at index NAME, which
	// would replace the segments up to it with nothing or other records, or a
	// NAME.FRONT file that names no segment, which walq's Open would finish
	// by removing every segment before NAME, or a
	// last file with a segment's name and no valid entry, named inside the
	// entries of the segment before it (where no segment of walq's
	// starts), which a repair would cut. It comes wrapped with ErrCorrupt;
	// the way out is to move the file out of the log directory.
	ErrForeign = errors.New("wal: file walq never writes")
	// ErrSegmentSizeUnknown is returned, wrapped with ErrCorrupt, by an
	// Open not given Options.SegmentSize (a salvaging or read-only open
	// of a log another program wrote) that finds an empty tail named past
	// a sealed segment that ends whole before it: segments between them
	// are missing, or a roll was torn on an entry boundary, and only the
	// writer's SegmentSize tells which. The way out is to open the log
	// with the writer's SegmentSize, which cuts a torn roll by itself (a
	// read-only open reports it in Report().Torn).
	ErrSegmentSizeUnknown = errors.New("wal: segment size unknown")
)

// location names a place in a segment file for error messages and reports.
type location struct {
	path  string // segment file
	off   int64  // byte offset of the entry's frame in the file
	ord   int    // entry ordinal inside the segment, -1 when unknown
	index uint64 // tidwall/wal index of the segment's first entry
}

func (loc location) String() string {
	if loc.ord < 0 {
		return fmt.Sprintf("segment %s offset %d", loc.path, loc.off)
	}
	return fmt.Sprintf("segment %s offset %d entry %d (index %d)",
		loc.path, loc.off, loc.ord, loc.index+uint64(loc.ord))
}

// corruptAt wraps ErrCorrupt with a location and the reason.
func corruptAt(loc location, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, loc, reason)
}
