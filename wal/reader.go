package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Reader iterates over the records of a Log in LSN order. It reads the
// segment files itself with pread through a read-ahead buffer, never
// through tidwall/wal, and only up to WrittenLSN; close behind the end of
// the tail it copies the bytes from memory instead (see refresh). A
// Reader is not safe for concurrent use; many Readers may run
// concurrently with each other, with Append, with the committer and with
// TruncateFront.
type Reader struct {
	l    *Log
	next LSN // LSN of the next record to return

	seg  *segment  // segment being read; nil until positioned
	file *segFile  // pinned handle on seg's file
	sr   segReader // read-ahead over file
	off  int64     // offset of the next entry's frame in seg
	ord  int       // ordinal of the next entry in seg
	want LSN       // first LSN the next entry must have

	body    []byte // records of the current entry not returned yet
	bodyLSN LSN    // LSN of body's first record
	left    uint32 // records left in body
	closed  bool
}

// NewReader returns a Reader of the records with LSN >= from.
func (l *Log) NewReader(from LSN) *Reader {
	return &Reader{l: l, next: from}
}

// Next returns the next record. It returns io.EOF when the Reader has
// caught up with WrittenLSN (a later call may return records written
// since), an error wrapping ErrNotFound if the records it needs were
// truncated away, and one wrapping ErrCorrupt, with the location, if an
// entry fails its checks. rec is valid until the next call.
func (r *Reader) Next() (lsn LSN, rec []byte, err error) {
	if r.closed || r.l.closed.Load() {
		return 0, nil, ErrClosed
	}
	for {
		for r.left > 0 {
			lsn = r.bodyLSN
			if rec, r.body, err = nextRecord(r.body); err != nil {
				return 0, nil, corruptAt(r.seg.loc(r.off, r.ord-1), err.Error()) // checked by decodeEntry
			}
			r.bodyLSN, r.left = lsn+1, r.left-1
			if lsn >= r.next {
				r.next = lsn + 1
				return lsn, rec, nil
			}
		}
		if err := r.advance(); err != nil {
			return 0, nil, err
		}
	}
}

// Close releases the Reader's segment file.
func (r *Reader) Close() error {
	if r.file != nil {
		_ = r.file.release() // read-only handle: a close error loses nothing
		r.file = nil
	}
	r.closed = true
	return nil
}

// advance loads the next entry into body, positioning the Reader first
// and moving to the next segment when the current one is exhausted.
func (r *Reader) advance() error {
	if r.seg == nil {
		return r.position()
	}
	limit, sealed, err := r.refresh()
	if err != nil {
		return err
	}
	if r.off >= limit {
		if !sealed {
			return io.EOF
		}
		return r.nextSegment()
	}
	n, h, e, err := r.sr.entry(r.off, limit)
	if err == nil && h.first != r.want {
		err = formatError(fmt.Sprintf("%s: entry starts at LSN %d, want %d", errLSNOutOfLine, h.first, r.want))
	}
	if err != nil {
		return r.damaged(err)
	}
	r.body, r.bodyLSN, r.left = e[h.size():], h.first, h.count
	r.off, r.ord, r.want = r.off+n, r.ord+1, h.end()
	return nil
}

// refresh returns how far the segment may be read and whether it is
// sealed; it follows a file handle replaced by truncation (same bytes,
// new file). Less than memReadMax behind the end of the tail, it takes
// the bytes its buffer lacks from memory, where the committer keeps them,
// rather than reading the file (segReader.fill).
func (r *Reader) refresh() (int64, bool, error) {
	l := r.l
	l.seg.RLock()
	defer l.seg.RUnlock()
	if r.seg.file != r.file && r.seg.file != nil {
		_ = r.file.release()
		r.file = r.seg.file.pin()
		r.sr.reset(r.file.f)
	}
	if r.seg.mem != nil {
		r.sr.fill(r.seg.mem, r.off)
	}
	return r.seg.size, r.seg.sealed, nil
}

// position finds the entry holding r.next.
func (r *Reader) position() error {
	l := r.l
	if first := l.FirstLSN(); r.next < first {
		return fmt.Errorf("%w: reader at LSN %d, the log starts at %d (truncated)", ErrNotFound, r.next, first)
	}
	if r.next > l.WrittenLSN() {
		return io.EOF
	}
	s, file, pt, err := l.locate(r.next)
	if err != nil {
		return err
	}
	r.seg, r.file = s, file
	r.sr.reset(file.f)
	r.off, r.ord, r.want = pt.off, pt.ord, pt.lsn
	return nil
}

// nextSegment moves to the segment after the exhausted one, checking that
// it continues the entry indexes and the LSNs.
func (r *Reader) nextSegment() error {
	l := r.l
	l.seg.RLock()
	next, listed := l.successorLocked(r.seg)
	var file *segFile
	if next != nil && (listed || next.firstLSN == r.want) {
		file = next.pin()
	}
	l.seg.RUnlock()
	if file == nil { // r.seg and its successor were truncated away under the Reader
		return fmt.Errorf("%w: reader at LSN %d, the log starts at %d (truncated)", ErrNotFound, r.want, l.FirstLSN())
	}
	if err := r.checkBoundary(next); err != nil {
		_ = file.release()
		return err
	}
	_ = r.file.release()
	r.seg, r.file = next, file
	r.sr.reset(file.f)
	r.off, r.ord = 0, 0
	return nil
}

// checkBoundary checks that next starts where the current segment ends.
// Under Salvage an LSN gap (reported at Open) is skipped.
func (r *Reader) checkBoundary(next *segment) error {
	r.l.seg.RLock()
	first := next.firstLSN
	r.l.seg.RUnlock()
	if r.l.opts.Salvage && first >= r.want {
		r.want = first
		return nil
	}
	if want := next.firstIndex - r.seg.firstIndex; uint64(r.ord) != want {
		return corruptAt(r.seg.loc(r.off, r.ord), fmt.Sprintf(
			"segment ends after %d entries but the next segment %s starts %d entries after it", r.ord, next.path, want))
	}
	if first != r.want {
		return corruptAt(next.loc(0, 0), fmt.Sprintf("%s: segment starts at LSN %d, want %d", errLSNOutOfLine, first, r.want))
	}
	return nil
}

// damaged handles an entry that failed its checks: an I/O error or
// ErrCorrupt, or under Salvage a jump to the next valid entry found at Open.
func (r *Reader) damaged(err error) error {
	if !isFormatError(err) {
		return fmt.Errorf("wal: read %s: %w", r.seg.loc(r.off, r.ord), err)
	}
	if !r.l.opts.Salvage {
		return corruptAt(r.seg.loc(r.off, r.ord), err.Error())
	}
	r.l.seg.RLock()
	pt, ok := r.seg.pointAfter(r.off)
	size := r.seg.size
	r.l.seg.RUnlock()
	if !ok {
		r.off = size
		return nil
	}
	r.off, r.ord, r.want = pt.off, pt.ord, pt.lsn
	return nil
}

// Read returns a copy of the record lsn. It returns an error wrapping
// ErrNotFound if lsn is outside [FirstLSN, WrittenLSN] (or was lost to
// damage skipped under Salvage), or ErrCorrupt with the location. Recently
// decoded entries are cached, so reading consecutive LSNs costs one read
// and one CRC per entry, not per record.
func (l *Log) Read(lsn LSN) ([]byte, error) {
	e, err := l.checkedEntry(lsn)
	if err != nil {
		return nil, err
	}
	return e.record(lsn), nil
}

// View calls fn with the record lsn, read and checked as Read reads and
// checks it (the entry's CRC, its framing), but not copied out: rec is the
// log's cached entry, the bytes every later Read and View of that record
// copies or passes on. fn must not write into rec, nor keep rec or any
// slice of it past its return (the bytes stay the cache's, and a write
// would change what every later Read of the entry returns). It returns
// Read's errors, or fn's. A caller that only checks a record (it can be
// read, it is the one expected) thus pays no copy of it.
func (l *Log) View(lsn LSN, fn func(rec []byte) error) error {
	e, err := l.checkedEntry(lsn)
	if err != nil {
		return err
	}
	return fn(e.view(lsn))
}

// checkedEntry returns the decoded entry that holds lsn, from the cache or
// read and checked, with Read's errors.
func (l *Log) checkedEntry(lsn LSN) (*decodedEntry, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if first, written := l.FirstLSN(), l.WrittenLSN(); lsn < first || lsn > written {
		return nil, fmt.Errorf("%w: LSN %d outside [%d, %d]", ErrNotFound, lsn, first, written)
	}
	if e := l.cache.get(lsn); e != nil {
		return e, nil
	}
	e, err := l.readEntry(lsn)
	if err != nil {
		return nil, err
	}
	l.cache.put(e)
	return e, nil
}

// readEntry reads, checks and decodes the entry holding lsn: it walks the
// entry headers from the nearest index point, then reads the entry.
func (l *Log) readEntry(lsn LSN) (*decodedEntry, error) {
	s, file, pt, err := l.locate(lsn)
	if err != nil {
		return nil, err
	}
	defer file.release()
	l.seg.RLock()
	limit := s.size
	l.seg.RUnlock()
	r := l.readers.Get().(*segReader)
	defer l.readers.Put(r)
	r.reset(file.f)
	off, ord, want := pt.off, pt.ord, pt.lsn
	for off < limit {
		n, h, err := r.header(off, limit)
		if err == nil && h.first != want && !(l.opts.Salvage && h.first > want) {
			err = formatError(fmt.Sprintf("%s: entry starts at LSN %d, want %d", errLSNOutOfLine, h.first, want))
		}
		switch {
		case err != nil && isFormatError(err) && l.opts.Salvage:
			l.seg.RLock()
			p, ok := s.pointAfter(off)
			l.seg.RUnlock()
			if !ok {
				return nil, lostErr(lsn)
			}
			off, ord, want = p.off, p.ord, p.lsn
			continue
		case err != nil && isFormatError(err):
			return nil, corruptAt(s.loc(off, ord), err.Error())
		case err != nil:
			return nil, fmt.Errorf("wal: read %s: %w", s.loc(off, ord), err)
		case h.first > lsn:
			return nil, lostErr(lsn)
		case h.contains(lsn):
			e, err := decodeAt(r, s.loc(off, ord), limit)
			if errors.Is(err, ErrCorrupt) && l.opts.Salvage {
				return nil, lostErr(lsn) // skipped and reported at Open
			}
			return e, err
		}
		off, ord, want = off+n, ord+1, h.end()
	}
	return nil, lostErr(lsn)
}

func lostErr(lsn LSN) error {
	return fmt.Errorf("%w: LSN %d was lost to damage skipped by Options.Salvage", ErrNotFound, lsn)
}

// decodeAt reads and checks the entry at loc and decodes it for the cache.
func decodeAt(r *segReader, loc location, limit int64) (*decodedEntry, error) {
	_, h, e, err := r.entry(loc.off, limit)
	if err != nil && isFormatError(err) {
		return nil, corruptAt(loc, err.Error())
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", loc, err)
	}
	if r.handOff(e) {
		return decodedEntryOf(h, e[h.size():]), nil
	}
	return newDecodedEntry(h, e), nil
}

// decodedEntry is an entry copied out of a segment, with the position of
// each record. It is immutable, so the cache shares it without locks.
type decodedEntry struct {
	h     entryHeader
	data  []byte   // the entry's records (the body)
	start []uint32 // start[i]: offset in data of record i's length prefix
}

// newDecodedEntry decodes a copy of the entry e.
func newDecodedEntry(h entryHeader, e []byte) *decodedEntry {
	return decodedEntryOf(h, append([]byte(nil), e[h.size():]...))
}

// decodedEntryOf decodes the entry whose body (its records) is data, and
// keeps data: nothing else may write it.
func decodedEntryOf(h entryHeader, data []byte) *decodedEntry {
	d := &decodedEntry{h: h, data: data, start: make([]uint32, h.count)}
	off := 0
	for i := range d.start {
		d.start[i] = uint32(off)
		n, k := binary.Uvarint(d.data[off:]) // framing checked by decodeEntry
		off += k + int(n)
	}
	return d
}

// record returns a copy of record lsn, which the entry holds.
func (d *decodedEntry) record(lsn LSN) []byte { return append([]byte{}, d.view(lsn)...) }

// view returns record lsn, which the entry holds, within the entry's
// bytes: shared, never to be written (its capacity is its length).
func (d *decodedEntry) view(lsn LSN) []byte {
	b := d.data[d.start[lsn-d.h.first]:]
	n, k := binary.Uvarint(b)
	return b[k : k+int(n) : k+int(n)]
}

// cacheSlots is the number of decoded entries Read keeps; cacheBigEntry is
// the entry size above which the cache keeps that entry alone, so that it
// holds at most max(cacheSlots × cacheBigEntry, one entry) bytes.
const (
	cacheSlots    = 4
	cacheBigEntry = 1 << 20
)

// entryCache keeps the last few entries Read decoded, so that reading
// consecutive LSNs (or a few interleaved streams of them) reads and checks
// each entry once.
type entryCache struct {
	slots [cacheSlots]atomic.Pointer[decodedEntry]
	next  atomic.Uint32 // slot the next put replaces, round robin
}

func (c *entryCache) get(lsn LSN) *decodedEntry {
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil && e.h.contains(lsn) {
			return e
		}
	}
	return nil
}

func (c *entryCache) put(e *decodedEntry) {
	if len(e.data) <= cacheBigEntry {
		c.slots[c.next.Add(1)%cacheSlots].Store(e)
		return
	}
	for i := range c.slots {
		c.slots[i].Store(nil)
	}
	c.slots[0].Store(e)
}
