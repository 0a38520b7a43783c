package wal

import "fmt"

// syncRolled fsyncs, through the Log's FS, each segment sealed by a roll
// (the one before each new segment in segs), then the directory, whose new
// names tidwall/wal does not fsync. The records of a sealed segment count
// as durable only after both.
func (c *committer) syncRolled(segs []*segment) error {
	sealed := append([]*segment{c.tail}, segs[:len(segs)-1]...)
	for _, s := range sealed {
		if c.l.opts.plant == bugNoSealSync {
			break
		}
		if err := c.f.datasync(s.file.f); err != nil {
			return fmt.Errorf("wal: fsync of sealed segment %s failed, log poisoned: %w", s.path, err)
		}
	}
	if c.l.opts.plant == bugNoRollDirSync {
		return nil
	}
	if err := SyncDirFS(c.l.opts.FS, c.l.dir); err != nil {
		return fmt.Errorf("%w (after segment roll), log poisoned", err)
	}
	return nil
}
