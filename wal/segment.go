package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
)

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	Path       string
	FirstIndex uint64 // tidwall/wal entry index of its first entry
	FirstLSN   LSN    // 0 for an empty segment
	Bytes      int64
}

// indexSpacing is the distance in bytes between two points of a segment's
// sparse index: a lookup reads at most this much before the entry it wants.
const indexSpacing = 4 << 10

// point is one entry of a segment's sparse index.
type point struct {
	lsn LSN   // first LSN of the entry
	off int64 // byte offset of the entry's frame
	ord int   // entry ordinal inside the segment
}

// segFile is a reference-counted read-only handle on a segment file. The
// Log's segment list holds one reference while the file is listed; readers
// take one (pin, only under Log.seg's read lock) for as long as they read
// it. The last release closes the file, so truncation never closes a file
// under a reader and never leaks one.
type segFile struct {
	f    File
	refs atomic.Int32 // listed (1) + pins; the file is closed at 0
}

func openSegFile(fsys FS, path string) (*segFile, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wal: open segment: %w", err)
	}
	sf := &segFile{f: f}
	sf.refs.Store(1)
	return sf, nil
}

// pin takes a reference. The caller holds Log.seg's read lock, so the
// listed reference cannot be dropped meanwhile.
func (sf *segFile) pin() *segFile {
	sf.refs.Add(1)
	return sf
}

// release drops a reference and closes the file after the last one.
func (sf *segFile) release() error {
	if sf.refs.Add(-1) == 0 {
		return sf.f.Close()
	}
	return nil
}

// segment is the Log's bookkeeping for one segment file.
type segment struct {
	path       string // immutable
	firstIndex uint64 // tidwall/wal index of the first entry; immutable

	// buildMu serializes the lazy index build of a sealed segment.
	buildMu sync.Mutex

	// Guarded by Log.seg (the RWMutex over the segment list).
	file     *segFile // current handle; replaced when tidwall/wal rewrites the file
	firstLSN LSN      // LSN of the first record; for an empty segment, the LSN its first record will get
	size     int64    // readable bytes: whole entries written (tail) or the file size (sealed)
	sealed   bool     // no more entries will be added
	indexed  bool     // points, entries and endLSN describe every entry
	points   []point  // sparse index, ascending; includes the first entry and every resync target
	entries  int      // valid entries, when indexed
	endLSN   LSN      // LSN after the last record, when indexed
	skipped  span     // Open under Salvage: entries its damaged regions held, at least and at most
	// mem is the tail's bytes [0, size) in memory (committer.publish);
	// nil when sealed or unknown. Bytes below len(mem) are never written
	// while published, and their storage is reused only after the
	// committer cleared mem under Log.seg's write lock.
	mem []byte
}

// pin takes a reference on the segment's file, or returns nil if the
// segment was removed; the caller holds Log.seg.
func (s *segment) pin() *segFile {
	if s.file == nil {
		return nil
	}
	return s.file.pin()
}

// drop releases the list's reference on a segment that leaves the list;
// the caller holds Log.seg for writing. Pinned handles stay open.
func (s *segment) drop() {
	if f := s.detach(); f != nil {
		_ = f.release() // read-only handle: a close error loses nothing
	}
}

// detach takes the list's reference on the segment's file away from the
// segment, for the caller to release once it has let go of Log.seg, which
// it holds for writing: no pin can reach the file after detach, and the
// last close of a removed segment's file, where the kernel frees the
// file's cached pages and blocks, need not hold up the writes and reads
// that wait for Log.seg (dropFront). nil when the segment has no file.
func (s *segment) detach() *segFile {
	f := s.file
	s.file = nil
	return f
}

// info returns the public description; the caller holds Log.seg.
func (s *segment) info() SegmentInfo {
	fl := s.firstLSN
	if s.size == 0 {
		fl = 0
	}
	return SegmentInfo{Path: s.path, FirstIndex: s.firstIndex, FirstLSN: fl, Bytes: s.size}
}

// loc returns a location inside the segment for error messages.
func (s *segment) loc(off int64, ord int) location {
	return location{path: s.path, off: off, ord: ord, index: s.firstIndex}
}

// pointFor returns the last index point at or before lsn; the caller holds
// Log.seg and the segment is indexed.
func (s *segment) pointFor(lsn LSN) point {
	i := sort.Search(len(s.points), func(i int) bool { return s.points[i].lsn > lsn })
	if i == 0 {
		return point{lsn: s.firstLSN}
	}
	return s.points[i-1]
}

// pointAfter returns the first index point past off (a resync target under
// Salvage); the caller holds Log.seg.
func (s *segment) pointAfter(off int64) (point, bool) {
	i := sort.Search(len(s.points), func(i int) bool { return s.points[i].off > off })
	if i == len(s.points) {
		return point{}, false
	}
	return s.points[i], true
}

// addEntry records a whole entry appended to the tail; the caller holds
// Log.seg for writing.
func (s *segment) addEntry(h entryHeader, off, n int64) {
	if len(s.points) == 0 || off-s.points[len(s.points)-1].off >= indexSpacing {
		s.points = append(s.points, point{lsn: h.first, off: off, ord: s.entries})
	}
	if s.entries == 0 {
		s.firstLSN = h.first
	}
	s.entries++
	s.endLSN = h.end()
	s.size = off + n
}

// readAhead is how much a segReader reads at once.
const readAhead = 256 << 10

// segReader reads entries of one segment file with pread through a
// read-ahead buffer. Slices it returns are valid until its next call.
type segReader struct {
	f     io.ReaderAt // the segment file
	ahead int         // bytes to read at once; readAhead when 0
	buf   []byte      // buf[:n] holds the file's bytes from offset off
	off   int64       // file offset of buf[0]
	n     int         // valid bytes in buf
}

// aheadBytes is how much the reader reads at once.
func (r *segReader) aheadBytes() int {
	if r.ahead == 0 {
		return readAhead
	}
	return r.ahead
}

func (r *segReader) reset(f io.ReaderAt) {
	r.f, r.off, r.n = f, 0, 0
}

// bytes returns the n bytes at off; limit is the readable size of the file.
func (r *segReader) bytes(off int64, n int, limit int64) ([]byte, error) {
	if off >= r.off && off+int64(n) <= r.off+int64(r.n) {
		i := int(off - r.off)
		return r.buf[i : i+n], nil
	}
	if off+int64(n) > limit {
		return nil, io.ErrUnexpectedEOF
	}
	ahead := int64(r.aheadBytes())
	want := int(min(max(int64(n), ahead), limit-off))
	if cap(r.buf) < want || (int64(cap(r.buf)) > 4*ahead && int64(want) <= ahead) {
		r.buf = make([]byte, want) // grow for a large entry, shrink after one
	}
	r.buf = r.buf[:want]
	m, err := r.f.ReadAt(r.buf, off)
	if m < n {
		r.n = 0
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("wal: read %d bytes at offset %d: %w", n, off, err)
	}
	r.off, r.n = off, m
	return r.buf[:n], nil
}

// handOff gives the caller e, bytes the reader just returned, for keeps
// when e is the whole of a buffer the reader grew for a large entry and
// would drop at its next small read anyway (see bytes): the reader
// forgets the buffer and never writes it again. It reports whether it
// did; otherwise e stays the reader's, valid until its next call.
func (r *segReader) handOff(e []byte) bool {
	if len(e) <= 4*r.aheadBytes() || len(e) != cap(r.buf) || &e[0] != &r.buf[0] {
		return false
	}
	r.buf, r.off, r.n = nil, 0, 0
	return true
}

// memReadMax bounds what a Reader copies from the tail's bytes in
// memory (segment.mem) at once, under Log.seg's read lock: a Reader close
// behind the writes takes what they added without a pread; one further
// behind reads the file ahead, as before.
const memReadMax = 64 << 10

// fill puts the bytes from off to the end of mem, the segment's bytes from
// offset 0, into the buffer, unless it holds them already or they are
// more than memReadMax. When the buffer holds off and has room, only the
// bytes past what it holds are appended: a Reader a little behind the
// writes copies each byte once, not its whole lag at every entry. The
// caller holds Log.seg's read lock.
func (r *segReader) fill(mem []byte, off int64) {
	end, held := int64(len(mem)), r.off+int64(r.n)
	if off >= end || end-off > memReadMax || (off >= r.off && end <= held) {
		return
	}
	if off >= r.off && off <= held && int64(cap(r.buf)-r.n) >= end-held {
		// Bytes already handed out lie below r.n and are not touched.
		r.buf = append(r.buf[:r.n], mem[held:]...)
		r.n = len(r.buf)
		return
	}
	n := int(end - off)
	if cap(r.buf) < n {
		r.buf = make([]byte, max(n, r.aheadBytes()))
	}
	r.buf = r.buf[:n]
	copy(r.buf, mem[off:])
	r.off, r.n = off, n
}

// frame reads the frame at off and returns its total length and the entry
// bytes. Format problems are formatErrors; I/O problems are not.
func (r *segReader) frame(off, limit int64) (int64, []byte, error) {
	avail := limit - off
	b, err := r.bytes(off, int(min(avail, binary.MaxVarintLen64)), limit)
	if err != nil {
		return 0, nil, err
	}
	k, size, err := decodeFrame(b, avail)
	if err != nil {
		return 0, nil, err
	}
	e, err := r.bytes(off+int64(k), int(size), limit)
	if err != nil {
		return 0, nil, err
	}
	return int64(k) + size, e, nil
}

// header reads the frame at off and decodes the entry header without
// reading the whole entry or checking its CRC.
func (r *segReader) header(off, limit int64) (int64, entryHeader, error) {
	avail := limit - off
	b, err := r.bytes(off, int(min(avail, binary.MaxVarintLen64+maxHeaderSize)), limit)
	if err != nil {
		return 0, entryHeader{}, err
	}
	k, size, err := decodeFrame(b, avail)
	if err != nil {
		return 0, entryHeader{}, err
	}
	if size < headerSize {
		return 0, entryHeader{}, errShortEntry
	}
	h, err := peekHeader(b[k:])
	switch {
	case err == nil && size < int64(h.size()):
		err = errShortEntry
	case err == nil && int64(h.count) > size-int64(h.size()):
		err = errBadRecord // every record takes at least one byte
	}
	return int64(k) + size, h, err
}

// entry reads and fully checks the entry at off.
func (r *segReader) entry(off, limit int64) (int64, entryHeader, []byte, error) {
	n, e, err := r.frame(off, limit)
	if err != nil {
		return 0, entryHeader{}, nil, err
	}
	h, err := decodeEntry(e)
	return n, h, e, err
}
