package wal

import (
	"fmt"
	"os"
	"time"
)

// LSN is a record's log sequence number. The first record of a new log is
// Options.StartLSN (1 by default); LSN 0 means "none".
type LSN = uint64

// SyncMode says when the log fsyncs.
type SyncMode uint8

const (
	SyncAlways   SyncMode = iota // fsync every group before its Wait returns
	SyncInterval                 // write at once; the fsync that covers it starts at most Options.SyncInterval after the write
	SyncNever                    // fsync only at segment roll-over and Close
)

// Defaults applied by Open to zero-valued Options fields.
const (
	defaultSegmentSize   = 4 << 20
	defaultSyncInterval  = 50 * time.Millisecond
	defaultMaxGroupBytes = 4 << 20
	defaultMaxRecordSize = 64 << 20
	defaultFileMode      = os.FileMode(0o600)
	defaultDirMode       = os.FileMode(0o700)
)

// Limits checked by Open.
const (
	minSegmentSize = 64      // smaller segments would roll after every entry anyway
	maxSizeOption  = 1 << 30 // bound for the byte-size options (1 GiB)
)

// Options configure a Log. Open copies them; a nil *Options means defaults.
// A zero field means its default.
type Options struct {
	SegmentSize   int64         // target bytes per segment; default 4 MiB; 64 B to 1 GiB; unset, a salvaging or read-only Open takes no torn roll at an entry boundary (doc.go)
	Sync          SyncMode      // default SyncAlways
	SyncInterval  time.Duration // SyncInterval's longest wait from a write to the start of its fsync; default 50ms
	MaxGroupBytes int           // records gathered into one entry; default 4 MiB; at most 1 GiB
	MaxRecordSize int           // largest record accepted; default 64 MiB; at most 1 GiB
	Salvage       bool          // skip damaged entries in sealed segments instead of failing Open/reads
	FileMode      os.FileMode   // default 0600
	DirMode       os.FileMode   // default 0700

	// StartLSN is the LSN of the first record when the log holds no
	// records (a new directory, or one whose only segment was cut back to
	// empty by repair); default 1. It is ignored when the log holds records.
	// A caller that keeps its own high-water mark (a snapshot) passes
	// mark+1 so that LSNs are never reused.
	StartLSN LSN
	// MustReach is the LSN up to which the log must hold every record: a
	// caller's snapshot reflects it, so the records up to it were written
	// and synced. A log that ends before it (after a torn tail is cut) lost
	// records: Open fails with ErrCorrupt and changes nothing, or under
	// Salvage reports the loss in Report.Salvaged and gives the next record
	// the LSN MustReach+1, in a new segment, so that no LSN is reused.
	// 0 (the default) checks nothing.
	MustReach LSN
	// ReadOnly opens the log without tidwall/wal and without repairing or
	// writing anything: a torn tail is reported by Report but not cut, and
	// Append, Flush's writes and TruncateFront are refused. Used by tools
	// (verify, dump) and tests.
	ReadOnly bool
	// Locked says that the caller holds an exclusive lock that covers the
	// directory (a queue locks its own directory, the log's parent), so
	// Open takes none of its own: one lock file per queue directory.
	Locked bool
	// FS is the file system the Log works through (see FS); nil means the
	// real one, OSFS. Crash and fault tests pass their own.
	FS FS
	// AppendOnly writes the segments by appending alone: no zeros are
	// written ahead of the tail (see "Zeros ahead of the tail" in the
	// package documentation; they are written under SyncAlways only). A
	// file system that does not overwrite in place (btrfs, ZFS) gains
	// nothing from them and writes them twice.
	AppendOnly bool

	plant              plantedBug // a durability bug planted by a crash test; see plant.go
	segmentSizeDefault bool       // SegmentSize was not given: the default filled in (tornroll.go)
}

// resolveOptions copies opts, fills in defaults and validates the result.
func resolveOptions(opts *Options) (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.fillDefaults()
	return o, o.validate()
}

func (o *Options) fillDefaults() {
	if o.SegmentSize == 0 {
		o.SegmentSize, o.segmentSizeDefault = defaultSegmentSize, true
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = defaultSyncInterval
	}
	if o.MaxGroupBytes == 0 {
		o.MaxGroupBytes = defaultMaxGroupBytes
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = defaultMaxRecordSize
	}
	if o.FileMode == 0 {
		o.FileMode = defaultFileMode
	}
	if o.DirMode == 0 {
		o.DirMode = defaultDirMode
	}
	if o.StartLSN == 0 {
		o.StartLSN = 1
	}
	o.FS = orOS(o.FS)
}

func (o *Options) validate() error {
	switch {
	case o.SegmentSize < minSegmentSize || o.SegmentSize > maxSizeOption:
		return invalid("SegmentSize", o.SegmentSize)
	case o.Sync > SyncNever:
		return invalid("Sync", o.Sync)
	case o.SyncInterval < 0:
		return invalid("SyncInterval", o.SyncInterval)
	case o.MaxGroupBytes < 0 || o.MaxGroupBytes > maxSizeOption:
		return invalid("MaxGroupBytes", o.MaxGroupBytes)
	case o.MaxRecordSize < 0 || o.MaxRecordSize > maxSizeOption:
		return invalid("MaxRecordSize", o.MaxRecordSize)
	case o.FileMode&^os.ModePerm != 0:
		return invalid("FileMode", o.FileMode)
	case o.DirMode&^os.ModePerm != 0:
		return invalid("DirMode", o.DirMode)
	case o.StartLSN >= 1<<62:
		return invalid("StartLSN", o.StartLSN)
	case o.MustReach >= 1<<62:
		return invalid("MustReach", o.MustReach)
	}
	return nil
}

func invalid(field string, v any) error {
	return fmt.Errorf("%w: %s = %v", ErrInvalidOptions, field, v)
}
