package wal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/wal"
)

// TestSalvageUnderEmptyTail: damage inside the last sealed segment, under
// the empty tail segment a roll leaves (a compaction's, or a crash right
// after a roll), is salvaged like damage anywhere else: the damaged entry
// still counts towards the index the tail is named after, so the tail is
// walq's own and a salvaging Open (read-only too) opens and reports the
// one damaged region; after damage in the middle, it appends after the
// last record.
func TestSalvageUnderEmptyTail(t *testing.T) {
	for _, e := range []struct {
		name string
		pick func(lay []entryPos) entryPos
		next wal.LSN // the LSN of the next record; 0: not checked (a lost last entry's LSNs are unknown)
	}{
		{"middle entry", func(lay []entryPos) entryPos { return lay[len(lay)-3] }, harnessRecords + 1},
		{"last entry", func(lay []entryPos) entryPos { return lay[len(lay)-1] }, 0},
	} {
		t.Run(e.name, func(t *testing.T) {
			src, lay := pristine(t)
			dir := t.TempDir()
			copyDir(t, src, dir)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			bad := e.pick(lay)
			flipBit(t, filepath.Join(dir, filepath.Base(bad.seg)), bad.off+bad.size-1)
			for _, ro := range []bool{true, false} {
				opts := harnessOpts
				opts.Salvage, opts.ReadOnly = true, ro
				l, err := wal.Open(dir, &opts)
				if err != nil {
					t.Fatalf("salvaging Open (read-only %v): %v", ro, err)
				}
				if rep := l.Report(); len(rep.Salvaged) != 1 || rep.Salvaged[0].FirstLSN != bad.first {
					t.Errorf("read-only %v: Salvaged = %+v, want the entry of LSN %d", ro, rep.Salvaged, bad.first)
				}
				if !ro && e.next != 0 {
					if lsn := appendN(t, l, harnessRecords, 1)[0]; lsn != e.next {
						t.Errorf("next LSN %d, want %d", lsn, e.next)
					}
				}
				closeLog(t, l)
			}
		})
	}
}

// TestSalvageNeverReusesLostLSN: the last entry of the last sealed
// segment, synced when the segment was sealed (its records may have been
// acknowledged), is damaged under the empty tail a roll left. Its LSNs
// cannot be read, so the salvage resumes past the most its bytes can hold:
// the next record never takes an LSN the damaged entry had, and a salvage
// after it reports the same loss and reads the new record.
func TestSalvageNeverReusesLostLSN(t *testing.T) {
	src, lay := pristine(t)
	dir := t.TempDir()
	copyDir(t, src, dir)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := lay[len(lay)-1]
	flipBit(t, filepath.Join(dir, filepath.Base(bad.seg)), bad.off+bad.size-1)
	opts := harnessOpts
	opts.Salvage = true
	l, err := wal.Open(dir, &opts)
	if err != nil {
		t.Fatalf("salvaging Open: %v", err)
	}
	lost := l.Report().Salvaged
	if len(lost) != 1 || lost[0].FirstLSN != bad.first || lost[0].LastLSN < bad.first+wal.LSN(bad.count)-1 {
		t.Fatalf("Salvaged = %+v, want one region from LSN %d past %d", lost, bad.first, bad.first+wal.LSN(bad.count)-1)
	}
	lsn := appendN(t, l, harnessRecords, 1)[0]
	if lsn <= bad.first+wal.LSN(bad.count)-1 {
		t.Errorf("next LSN %d reuses the LSN %d of the damaged, synced entry", lsn, bad.first)
	}
	if lsn != lost[0].LastLSN+1 {
		t.Errorf("next LSN %d, want %d, after the LSNs reported lost", lsn, lost[0].LastLSN+1)
	}
	closeLog(t, l)
	opts.ReadOnly = true
	l = openLog(t, dir, &opts)
	defer closeLog(t, l)
	if again := l.Report().Salvaged; len(again) != 1 || again[0].FirstLSN != lost[0].FirstLSN || again[0].LastLSN != lost[0].LastLSN {
		t.Errorf("after an append, Salvaged = %+v, want %+v", again, lost)
	}
	if rec, err := l.Read(lsn); err != nil || string(rec) != string(record(harnessRecords)) {
		t.Errorf("Read(%d) = %q, %v; want the record appended", lsn, rec, err)
	}
}

// TestSalvageAmbiguousTailRefused: the payload of the last sealed entry is
// damaged, so how many entries its bytes held cannot be told, under a
// file holding junk where the log's next segment would be. A salvaging
// Open cannot tell a torn first write from a foreign file: it refuses,
// saying what to do, and leaves the file as it was.
func TestSalvageAmbiguousTailRefused(t *testing.T) {
	src, lay := pristine(t)
	bad := lay[len(lay)-1]
	if bad.size < 2*(1+17+1) {
		t.Fatalf("last entry of %d bytes: too short for its count to be unknown", bad.size)
	}
	for _, ro := range []bool{true, false} {
		dir := t.TempDir()
		copyDir(t, src, dir)
		tail := filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1))
		const content = "junk, or a torn write"
		if err := os.WriteFile(tail, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		flipBit(t, filepath.Join(dir, filepath.Base(bad.seg)), bad.off+bad.size-1)
		opts := harnessOpts
		opts.Salvage, opts.ReadOnly = true, ro
		l, err := wal.Open(dir, &opts)
		if err == nil {
			closeLog(t, l)
			t.Fatalf("read-only %v: Open took a file it cannot tell from a foreign one", ro)
		}
		if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "move it out of the log directory") {
			t.Errorf("read-only %v: Open: %v, want ErrCorrupt saying what to do", ro, err)
		}
		if b, err := os.ReadFile(tail); err != nil || string(b) != content {
			t.Errorf("read-only %v: %s now %q (%v), want it unchanged", ro, filepath.Base(tail), b, err)
		}
	}
}

// TestSalvageLengthDamageUnderEmptyTail damages the frame length of each
// entry of the last sealed segment, under a tail file holding junk: a
// salvaging Open takes the file as its own tail only where walq's next
// segment would be (a length cannot be trusted after a CRC failure, so
// the count of damaged entries must not rest on it), and refuses it
// under any other name.
func TestSalvageLengthDamageUnderEmptyTail(t *testing.T) {
	src, lay := pristine(t)
	var sealed []entryPos
	for _, e := range lay {
		if e.seg == lay[len(lay)-1].seg {
			sealed = append(sealed, e)
		}
	}
	own := len(lay) + 1
	for _, e := range sealed {
		for _, nv := range []byte{0x01, 0x05, 0x7f, 0x00, 0x81} {
			for _, name := range []int{own, own + 1, own + 2, own - 1} {
				dir := t.TempDir()
				copyDir(t, src, dir)
				tail := filepath.Join(dir, fmt.Sprintf("%020d", name))
				if err := os.WriteFile(tail, []byte("foreign junk"), 0o600); err != nil {
					t.Fatal(err)
				}
				fileOp(t, filepath.Join(dir, filepath.Base(e.seg)), func(b []byte) []byte { b[e.off] = nv; return b })
				opts := harnessOpts
				opts.Salvage, opts.ReadOnly = true, true
				l, err := wal.Open(dir, &opts)
				switch {
				case err == nil:
					rep := l.Report()
					closeLog(t, l)
					if name == own {
						checkLengthDamage(t, rep, e)
					} else {
						t.Errorf("entry LSN %d, length byte %#x: a file named %d (the log's tail would be %d) accepted", e.first, nv, name, own)
					}
				case name == own:
					t.Errorf("entry LSN %d, length byte %#x: the log's own tail refused: %v", e.first, nv, err)
				case !errors.Is(err, wal.ErrCorrupt):
					t.Errorf("entry LSN %d, length byte %#x, file named %d: %v, want ErrCorrupt", e.first, nv, name, err)
				}
			}
		}
	}
}

// TestSalvageKeepsForeignTail: after the frame length of an entry of the
// last sealed segment became 1, a writable salvaging Open refuses a file
// named two past the log's last entry, and leaves it as it was.
func TestSalvageKeepsForeignTail(t *testing.T) {
	src, lay := pristine(t)
	e := lay[len(lay)-8]
	dir := t.TempDir()
	copyDir(t, src, dir)
	tail := filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+2))
	const content = "a foreign file, not walq's"
	if err := os.WriteFile(tail, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	fileOp(t, filepath.Join(dir, filepath.Base(e.seg)), func(b []byte) []byte { b[e.off] = 0x01; return b })
	opts := harnessOpts
	opts.Salvage = true
	l, err := wal.Open(dir, &opts)
	if err == nil {
		closeLog(t, l)
		t.Errorf("a foreign %s accepted as the log's tail", filepath.Base(tail))
	} else if !errors.Is(err, wal.ErrCorrupt) {
		t.Errorf("Open: %v, want ErrCorrupt", err)
	}
	if b, err := os.ReadFile(tail); err != nil || string(b) != content {
		t.Errorf("foreign %s now %q (%v), want it unchanged", filepath.Base(tail), b, err)
	}
}

// checkLengthDamage: damage to the frame length of entry e is reported as
// the loss of that one entry, with its LSNs.
func checkLengthDamage(t *testing.T, rep wal.Report, e entryPos) {
	t.Helper()
	for _, d := range rep.Salvaged {
		if d.Offset == e.off && filepath.Base(d.Segment) == filepath.Base(e.seg) {
			if d.Entries != 1 || d.FirstLSN != e.first || d.LastLSN != e.first+wal.LSN(e.count)-1 {
				t.Errorf("entry LSN %d: Salvaged %+v, want one entry, LSNs %d-%d", e.first, d, e.first, e.first+wal.LSN(e.count)-1)
			}
		}
	}
}

// TestSalvageGroupUnderEmptyTail: the last sealed entry holds a group of
// records and is damaged under the empty tail. With only its frame length
// damaged, the entry still passes its CRC: the salvage reports its exact
// LSNs and the log resumes right after them. With its payload damaged,
// the LSNs are bounded by its bytes, and the log resumes past the bound,
// never at an LSN the group had.
func TestSalvageGroupUnderEmptyTail(t *testing.T) {
	const group = 10
	src, lay := groupedLog(t, group)
	last := lay[len(lay)-1]
	end := last.first + group - 1
	for _, tc := range []struct {
		name  string
		at    int64 // byte changed
		exact bool  // the LSNs lost are known exactly
	}{
		{"frame length", last.off, true},
		{"payload", last.off + last.size - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			fileOp(t, filepath.Join(dir, filepath.Base(last.seg)), func(b []byte) []byte { b[tc.at] ^= 0x40; return b })
			opts := harnessOpts
			opts.Salvage = true
			l, err := wal.Open(dir, &opts)
			if err != nil {
				t.Fatalf("salvaging Open: %v", err)
			}
			defer closeLog(t, l)
			lost := l.Report().Salvaged
			if len(lost) != 1 || lost[0].FirstLSN != last.first || lost[0].LastLSN < end || (tc.exact && lost[0].LastLSN != end) {
				t.Fatalf("Salvaged = %+v, want one region from LSN %d to %d (exact %v)", lost, last.first, end, tc.exact)
			}
			lsn := appendN(t, l, 0, 1)[0]
			if lsn <= end || lsn != lost[0].LastLSN+1 {
				t.Errorf("next LSN %d, want %d, past the group's last LSN %d", lsn, lost[0].LastLSN+1, end)
			}
		})
	}
}

// TestSalvageTornFirstWrite: damage in the last sealed segment hides how
// many entries it held (two adjacent damaged entries, or one damaged group
// of records, with a valid entry after them), then a crash tears the first
// write to the empty tail the roll made. (Damage in the last entry, with
// no record after it, hides it too.) A salvaging Open (read-only too)
// takes the log's own tail, whose bytes start as walq's first entry there
// would (the frame length, version, and as much of the header as the crash
// kept: the LSN the log goes on at), and a writable one cuts it and goes on
// after the last record, or past the most the damage can have held. A
// file under the same name whose bytes disagree with that entry is refused
// and left as it was.
func TestSalvageTornFirstWrite(t *testing.T) {
	const group = 10
	for _, lc := range []struct {
		name   string
		build  func(t *testing.T) (string, []entryPos)
		damage func(lay []entryPos) []entryPos // entries whose last byte is flipped
	}{
		{"two entries", func(t *testing.T) (string, []entryPos) { return pristine(t) },
			func(lay []entryPos) []entryPos { return lay[len(lay)-3 : len(lay)-1] }},
		{"group entry", func(t *testing.T) (string, []entryPos) { return groupedLog(t, group) },
			func(lay []entryPos) []entryPos { return lay[len(lay)-2 : len(lay)-1] }},
		{"last entry", func(t *testing.T) (string, []entryPos) { return pristine(t) },
			func(lay []entryPos) []entryPos { return lay[len(lay)-1:] }},
	} {
		src, lay := lc.build(t)
		last := lay[len(lay)-1]
		next := last.first + wal.LSN(last.count) // where the log goes on
		for _, tc := range []struct {
			name  string
			bytes []byte
			taken bool
		}{
			{"length, CRC and version", []byte{40, 0x12, 0x34, 0x56, 0x78, 1}, true},
			{"up to the LSN", tornHeader(40, next, 1)[:1+13], true},
			{"whole header", tornHeader(40, next, 1), true},
			{"another LSN", tornHeader(40, next+1000, 1), false},
			{"another version", []byte{40, 0x12, 0x34, 0x56, 0x78, 3}, false},
			{"a length no entry has", []byte{12, 0x12, 0x34, 0x56, 0x78, 1}, false},
			{"a count the length cannot hold", tornHeader(40, next, 30), false},
			{"too short to tell", []byte{40, 0x12, 0x34}, false},
		} {
			for _, ro := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/ro=%v", lc.name, tc.name, ro), func(t *testing.T) {
					dir := t.TempDir()
					copyDir(t, src, dir)
					for _, e := range lc.damage(lay) {
						flipBit(t, filepath.Join(dir, filepath.Base(e.seg)), e.off+e.size-1)
					}
					tail := filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1))
					if err := os.WriteFile(tail, tc.bytes, 0o600); err != nil {
						t.Fatal(err)
					}
					opts := harnessOpts
					opts.Salvage, opts.ReadOnly = true, ro
					l, err := wal.Open(dir, &opts)
					if !tc.taken {
						if err == nil {
							closeLog(t, l)
							t.Fatalf("% x accepted as a torn first write of the entry at LSN %d", tc.bytes, next)
						}
						if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "move it out of the log directory") {
							t.Errorf("Open: %v, want ErrCorrupt saying what to do", err)
						}
						if b, err := os.ReadFile(tail); err != nil || string(b) != string(tc.bytes) {
							t.Errorf("the refused tail is now % x (%v), want it unchanged", b, err)
						}
						return
					}
					if err != nil {
						t.Fatalf("salvaging Open: %v", err)
					}
					defer closeLog(t, l)
					if rep := l.Report(); rep.Torn == nil || filepath.Base(rep.Torn.Segment) != filepath.Base(tail) {
						t.Errorf("Report().Torn = %+v, want the torn write in %s", rep.Torn, filepath.Base(tail))
					}
					if !ro {
						want := next // after the last record, or past the most the damage can have held
						for _, d := range l.Report().Salvaged {
							want = max(want, d.LastLSN+1)
						}
						if lsn := appendN(t, l, harnessRecords, 1)[0]; lsn != want {
							t.Errorf("next LSN %d, want %d", lsn, want)
						}
					}
				})
			}
		}
	}
}

// tornHeader returns the first bytes of a frame of walq's: a one-byte
// entry length, then an entry header with a CRC that does not match (the
// rest of the entry was lost).
func tornHeader(length byte, first wal.LSN, count uint32) []byte {
	b := []byte{length, 0x12, 0x34, 0x56, 0x78, 1}
	b = binary.LittleEndian.AppendUint64(b, first)
	return binary.LittleEndian.AppendUint32(b, count)
}

// groupedLog builds a log of 40 entries of group records each, over
// several segments, the last one holding two entries at least, and
// returns its directory and layout.
func groupedLog(t *testing.T, group int) (string, []entryPos) {
	t.Helper()
	src := t.TempDir()
	opts := harnessOpts
	l := openLog(t, src, &opts)
	for i := 0; i < 40; i++ {
		recs := make([][]byte, group)
		for j := range recs {
			recs[j] = record(i*group + j)
		}
		_, c, err := l.AppendAll(recs, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, l)
	lay := layoutOf(t, src)
	if lay[len(lay)-1].count != group || lay[len(lay)-2].seg != lay[len(lay)-1].seg || len(segmentFiles(t, src)) < 3 {
		t.Fatalf("layout: %d segments, the last two entries not of %d records each in one segment", len(segmentFiles(t, src)), group)
	}
	return src, lay
}

// TestSalvageUnknownFirstLSN: the only sealed segment is damaged to its
// end under the empty tail a roll left, and no record before the damage
// tells its first LSN: the log's front was truncated, or it began at a
// StartLSN that a reopen need not repeat. No upper bound of the LSNs the
// log gave out can be proved, so a salvaging Open (read-only too) refuses
// with ErrCorrupt, saying what to do, and changes nothing; done as it
// says, the log goes on past the LSN given.
func TestSalvageUnknownFirstLSN(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   wal.LSN // Options.StartLSN the log began with
		records int     // enough, truncated, for the damaged segment's bytes to be fewer than the LSNs before it
	}{
		{"front truncated", 0, 6000},
		{"StartLSN not repeated", 100000, harnessRecords},
	} {
		for _, ro := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/ro=%v", tc.name, ro), func(t *testing.T) {
				src := t.TempDir()
				opts := harnessOpts
				opts.StartLSN = tc.start
				l := openLog(t, src, &opts)
				for i := 0; i < tc.records; i++ {
					appendN(t, l, i, 1)
				}
				closeLog(t, l)
				lay := layoutOf(t, src)
				last := lay[len(lay)-1]
				if last.first < 6000 && tc.start == 0 {
					t.Fatalf("the log ends at LSN %d, too few for its last segment to hold fewer bytes", last.first)
				}
				dir := t.TempDir()
				copyDir(t, src, dir)
				for _, p := range segmentFiles(t, dir) {
					if filepath.Base(p) != filepath.Base(last.seg) {
						if err := os.Remove(p); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, e := range lay {
					if e.seg == last.seg {
						flipBit(t, filepath.Join(dir, filepath.Base(e.seg)), e.off+e.size-1)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", len(lay)+1)), nil, 0o600); err != nil {
					t.Fatal(err)
				}
				before := dirState(t, dir)
				ropts := harnessOpts
				ropts.Salvage, ropts.ReadOnly = true, ro
				l, err := wal.Open(dir, &ropts)
				if err == nil {
					var lsn wal.LSN
					if !ro {
						lsn = appendN(t, l, harnessRecords, 1)[0]
					}
					closeLog(t, l)
					t.Fatalf("salvaging Open opened (next LSN %d, 0 when read-only; the damaged entries ended at LSN %d), want ErrCorrupt", lsn, last.first)
				}
				if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(err.Error(), "Options.StartLSN") {
					t.Fatalf("Open: %v, want ErrCorrupt saying what to do", err)
				}
				if after := dirState(t, dir); after != before {
					t.Fatalf("a refused Open changed the directory:\n%s\nnow\n%s", before, after)
				}
				if ro {
					return
				}
				if err := os.Rename(filepath.Join(dir, filepath.Base(last.seg)), filepath.Join(t.TempDir(), "moved")); err != nil {
					t.Fatal(err)
				}
				ropts.StartLSN = last.first + 1
				l = openLog(t, dir, &ropts)
				defer closeLog(t, l)
				if lsn := appendN(t, l, harnessRecords, 1)[0]; lsn != last.first+1 {
					t.Errorf("next LSN %d after the move, want %d", lsn, last.first+1)
				}
			})
		}
	}
}

// TestSalvageResumesPastDamageAfterAnExactLoss: the log's first segment
// holds one entry whose frame length alone is damaged (its header passes
// the CRC, so its LSN is known), and the next one, the last sealed under
// the empty tail, is damaged whole. No record precedes the second, but the
// first's exact LSNs do: its LSNs are bounded from there, and a salvaging
// Open goes on past the most it can have held, never at an LSN it had.
func TestSalvageResumesPastDamageAfterAnExactLoss(t *testing.T) {
	src := t.TempDir()
	opts := harnessOpts
	l := openLog(t, src, &opts)
	if _, c, err := l.Append(make([]byte, 5000)); err != nil || c.Wait() != nil {
		t.Fatalf("Append of a segment's worth: %v", err)
	}
	for i := 0; len(l.Segments()) < 4; i++ {
		appendN(t, l, i, 1)
	}
	closeLog(t, l)
	lay := layoutOf(t, src)
	segs := segmentFiles(t, src)
	dir := t.TempDir()
	copyDir(t, src, dir)
	for _, p := range segs[2:] {
		if err := os.Remove(filepath.Join(dir, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	var first, whole []entryPos // the entries of the first segment, and of the second
	for _, e := range lay {
		switch e.seg {
		case segs[0]:
			first = append(first, e)
		case segs[1]:
			whole = append(whole, e)
		}
	}
	if len(first) != 1 || len(whole) < 2 {
		t.Fatalf("layout: %d entries in the first segment, %d in the second; want 1 and more", len(first), len(whole))
	}
	fileOp(t, filepath.Join(dir, filepath.Base(segs[0])), func(b []byte) []byte { b[0] ^= 0x01; return b })
	for _, e := range whole {
		flipBit(t, filepath.Join(dir, filepath.Base(e.seg)), e.off+e.size-1)
	}
	end := whole[len(whole)-1].first + wal.LSN(whole[len(whole)-1].count) // the LSN after the damaged entries
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d", 1+len(first)+len(whole))), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ropts := harnessOpts
	ropts.Salvage = true
	l, err := wal.Open(dir, &ropts)
	if err != nil {
		t.Fatalf("salvaging Open: %v", err)
	}
	defer closeLog(t, l)
	if lsn := appendN(t, l, harnessRecords, 1)[0]; lsn < end {
		t.Errorf("next LSN %d, an LSN the damaged entries had (they ended before %d); Salvaged %+v", lsn, end, l.Report().Salvaged)
	}
}
