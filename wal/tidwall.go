package wal

import (
	"fmt"
	"reflect"
	"unsafe"

	twal "github.com/tidwall/wal"
)

// This file holds everything walq assumes about github.com/tidwall/wal
// v1.2.1, which appends the entries and rolls the segment files: its file
// names, its roll rule and its calls. Nothing else in the package imports
// it, so replacing or upgrading it touches this file (and the tests that
// pin the roll rule, roll_test.go).
//
// What tidwall/wal does with package os directly, out of FS's sight:
//
//   - WriteBatch appends the entries to the tail file, and at a roll fsyncs
//     the sealed file, closes it and creates the next one. walq fsyncs the
//     sealed file again through FS, and the directory, before it counts
//     the sealed records durable (committer.adoptRolls), and before it
//     writes anything into the next file: a batch that rolls is handed to
//     WriteBatch in parts, each ending with the entry that seals a
//     segment, or the batch's last (committer.writeParts). Only a tail
//     that Open found past the segment size, and fsynced, is sealed by
//     WriteBatch before the first entry of a part; walq creates the file
//     it rolls to first, empty, and fsyncs the directory
//     (committer.createPreRolled): the create opens with
//     O_CREATE|O_TRUNC, so it takes that file for its own. A tail of
//     exactly the segment size it does not roll before a write, but
//     appends to; Open rolls such a tail itself, before it opens
//     tidwall/wal (Log.rollFullTail).
//   - Open creates the first segment in an empty directory; walq fsyncs
//     the directory and that file through FS.
//
// tidwall/wal's own fsyncs are never counted on: it is opened with NoSync,
// and walq makes every fsync it counts through FS.
//
// walq does not call tidwall/wal's TruncateFront, which rewrites the kept
// segment into NAME.START.TEMP and renames it over NAME with os: a crash
// could keep that rename and lose the copy's bytes, whose fsync the FS
// never sees. It removes the front segments itself, through FS, and drops
// them from tidwall/wal's list of segments (segmentList below), or, should
// that list not be laid out as expected, reopens tidwall/wal
// (truncateFront below). Open still finishes a truncation that an older
// walq began with tidwall/wal (prepareDir).

// File names in a log directory, as tidwall/wal writes them: NAME is the
// 20-digit index of the segment's first entry; its TruncateFront writes
// NAME.START.TEMP, renames it to NAME.START, removes older segments and
// renames NAME.START to NAME. NAME.FRONT is walq's own: an empty file that
// says the segments before NAME are being removed (tidwall/wal ignores it).
const (
	nameDigits  = 20
	startSuffix = ".START"
	endSuffix   = ".END"
	tempSuffix  = ".TEMP"
	frontSuffix = ".FRONT"
)

func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

// store is the segment writer the committer drives: tidwall/wal
// (tidwallStore) in production. Entry indexes are absolute; the first
// entry of a new log is index 1.
type store interface {
	// writeBatch appends the batch's entries, rolling to new segment
	// files as planRolls predicts; it does not fsync.
	writeBatch(b *storeBatch) error
	// truncateFront forgets every segment before the one that starts at
	// index. It returns remove, which removes their files durably and
	// touches nothing the store keeps in memory, so that the caller may
	// run it without the committer's mutex; remove is nil when the files
	// are already removed, durably (reopenFront).
	truncateFront(index uint64) (remove func() error, err error)
	firstIndex() (uint64, error)
	lastIndex() (uint64, error)
	// dropCache forgets sealed segments the store kept in memory.
	dropCache() error
	// tailBytes returns the store's copy of the tail segment's bytes from
	// offset 0, or nil when it keeps none it can show. The bytes it
	// returns are never changed, except that a roll (dropCache) or
	// truncateFront may reuse their storage for the next copy of the tail.
	tailBytes() []byte
	close() error
}

// storeBatch is a batch of entries for store.writeBatch; add copies the
// entry, so the caller may reuse its buffer at once.
type storeBatch struct {
	tw      twal.Batch
	witness bool // the batch is one witness (witness.go), told to the FS as StoreWriteWitness
}

func (b *storeBatch) add(index uint64, entry []byte) { b.tw.Write(index, entry) }
func (b *storeBatch) clear()                         { b.tw.Clear(); b.witness = false }

// tidwallStore is a store over tidwall/wal. obs, when not nil, is told of
// each write before it is made and may fail it (see FS).
type tidwallStore struct {
	tw       *twal.Log
	obs      storeObserver
	dir      string
	opts     Options   // the Log's, to reopen tidwall/wal and reach its FS
	reserved bool      // the tail's copy in memory has its room, or cannot get it (reserveTail); false after a reopen
	tail     *tailCopy // tidwall/wal's copy of the tail segment (findTailCopy); nil until found, and after a roll or a reopen
	// beforeReopen cuts the zeros ahead of the tail's written end
	// (extend.go), which tidwall/wal would read back as empty entries;
	// nil when there is nothing to cut.
	beforeReopen func() error
}

// openStore opens tidwall/wal on a directory prepareDir left ready. fsys
// is the Log's FS, told of each store write if it observes them.
func openStore(dir string, o Options) (store, error) {
	tw, err := openTidwall(dir, o)
	if err != nil {
		return nil, err
	}
	s := &tidwallStore{tw: tw, dir: dir, opts: o}
	s.obs, _ = o.FS.(storeObserver)
	return s, nil
}

func openTidwall(dir string, o Options) (*twal.Log, error) {
	tw, err := twal.Open(dir, &twal.Options{
		NoSync:           true, // walq fsyncs, through FS
		SegmentSize:      int(o.SegmentSize),
		LogFormat:        twal.Binary,
		SegmentCacheSize: 1,
		AllowEmpty:       true, // a repair may cut the only segment to nothing
		DirPerms:         o.DirMode,
		FilePerms:        o.FileMode,
	})
	if err != nil {
		return nil, fmt.Errorf("wal: open tidwall/wal in %s: %w", dir, err)
	}
	return tw, nil
}

func (s *tidwallStore) observe(op string) error {
	if s.obs == nil {
		return nil
	}
	return s.obs.StoreOp(op)
}

func (s *tidwallStore) writeBatch(b *storeBatch) error {
	op := StoreWriteBatch
	if b.witness {
		op = StoreWriteWitness
	}
	if err := s.observe(op); err != nil {
		return err
	}
	if !s.reserved {
		s.reserveTail()
	}
	return s.tw.WriteBatch(&b.tw)
}

// reserveTail gives tidwall/wal's copy of the tail segment its room once
// the segment holds reserveAfter bytes: a segment that stays small keeps
// a small copy. It gives up until the next roll when it cannot find the
// copy.
func (s *tidwallStore) reserveTail() {
	if s.tail == nil {
		if s.tail = findTailCopy(s.tw); s.tail == nil {
			s.reserved = true
			return
		}
	}
	if len(*s.tail.buf) < reserveAfter(s.opts.SegmentSize) {
		return
	}
	room := tailRoom(s.opts.SegmentSize)
	s.tail.reserve(room, s.tail.expected(room), tailCopy{})
	s.reserved = true
}

// truncateFront drops the front segments from tidwall/wal's list of
// segments, when it can be reached (findSegmentList), leaving tidwall/wal
// open with its copy of the tail as it was, and returns the removal of
// their files (removeFront) for the caller to run. tidwall/wal reads no
// segment but its tail once the list is dropped, and a roll only creates
// files after the tail, so the removal may run while the committer writes
// and rolls. Otherwise it closes tidwall/wal, removes the files and
// reopens it (reopenFront), which reads the whole tail segment back from
// the file. After a failure the Log is poisoned anyway.
func (s *tidwallStore) truncateFront(index uint64) (func() error, error) {
	if err := s.observe(StoreTruncateFront); err != nil {
		return nil, err
	}
	list := findSegmentList(s.tw)
	k := list.find(index)
	if k < 0 {
		return nil, s.reopenFront(index)
	}
	list.dropFront(k)
	fsys, dir := s.opts.FS, s.dir
	return func() error { return removeFront(fsys, dir, index) }, nil
}

// reopenFront is truncateFront for a tidwall/wal whose segment list is not
// laid out as expected: it closes tidwall/wal, removes the front segments
// and reopens it. After a failure the store is closed.
func (s *tidwallStore) reopenFront(index uint64) error {
	var old tailCopy
	if s.tail != nil {
		old = s.tail.take()
	}
	if err := s.tw.Close(); err != nil {
		return err
	}
	if s.beforeReopen != nil {
		if err := s.beforeReopen(); err != nil {
			return err
		}
	}
	if err := removeFront(s.opts.FS, s.dir, index); err != nil {
		return err
	}
	tw, err := openTidwall(s.dir, s.opts)
	if err != nil {
		return err
	}
	s.tw, s.reserved, s.tail = tw, false, nil
	// The reopened store read the tail into a copy of its own: the old
	// copy's storage, when it had its room, takes it, positions too.
	// Otherwise reserveTail decides, as for any tail.
	room := tailRoom(s.opts.SegmentSize)
	if !old.fits(room) {
		return nil
	}
	if s.tail = findTailCopy(tw); s.tail != nil {
		s.tail.reserve(room, old.posCap(), old)
		s.reserved = true
	}
	return nil
}

func (s *tidwallStore) firstIndex() (uint64, error) { return s.tw.FirstIndex() }
func (s *tidwallStore) lastIndex() (uint64, error)  { return s.tw.LastIndex() }
func (s *tidwallStore) close() error                { return s.tw.Close() }

func (s *tidwallStore) tailBytes() []byte {
	if s.tail == nil {
		return nil
	}
	return *s.tail.buf
}

// dropCache is called after a roll: the tail is a new segment. The copy
// of the segment sealed last, which tidwall/wal drops, becomes the new
// tail's copy at once (reserveTail's room, without a new allocation).
func (s *tidwallStore) dropCache() error {
	var sealed tailCopy
	if s.tail != nil {
		sealed = s.tail.take()
	}
	s.reserved, s.tail = false, nil
	if err := s.tw.ClearCache(); err != nil {
		return err
	}
	room := tailRoom(s.opts.SegmentSize)
	if !sealed.fits(room) {
		return nil
	}
	// The sealed segment's entry count is what a full segment holds: the
	// new tail's first entries say little about it.
	if s.tail = findTailCopy(s.tw); s.tail != nil {
		n := sealed.posLen()
		s.tail.reserve(room, n+n/4, sealed)
		s.reserved = true
	}
	return nil
}

// rollPlan says where tidwall/wal will put each entry of a batch. The
// committer computes it before WriteBatch instead of asking tidwall/wal,
// which does not expose offsets, and checks afterwards that the files it
// predicts exist with the sizes it predicts.
type rollPlan struct {
	offs   []int64 // offs[i]: byte offset of entry i's frame in its segment
	starts []int   // batch positions where a new segment starts, ascending; len(frames) for a new empty tail
	sealed []int64 // sealed[j]: final size of the segment closed by roll j
	tail   int64   // bytes in the tail segment after the batch
}

// planRolls replicates the roll rule of tidwall/wal v1.2.1's writeBatch:
// before the batch, a tail of more than segSize bytes is sealed; after each
// entry, a tail of at least segSize bytes is sealed. Sealing means fsync,
// close and create the next file, named by the index of the entry that
// will come next (so a batch that fills a segment exactly leaves a new,
// empty tail). tail is the tail's size before the batch; frames are the
// framed sizes of the batch's entries.
func planRolls(tail, segSize int64, frames []int64) rollPlan {
	p := rollPlan{offs: make([]int64, len(frames))}
	if tail > segSize {
		p.starts, p.sealed, tail = append(p.starts, 0), append(p.sealed, tail), 0
	}
	for i, n := range frames {
		p.offs[i] = tail
		tail += n
		if tail >= segSize {
			p.starts, p.sealed, tail = append(p.starts, i+1), append(p.sealed, tail), 0
		}
	}
	p.tail = tail
	return p
}

// tidwall/wal keeps a copy of the tail segment in memory (segment.ebuf)
// and appends each entry to it before it writes the entry to the file,
// with the entry's position (segment.epos). The copy starts empty at each
// roll and grows as append grows it, by a quarter each time once large:
// over a 4 MiB segment every byte written is copied about four more
// times, and the garbage of the old copies drives the GC (together about
// a fifth of a lone no-fsync caller's CPU); the positions grow the same
// way. Once the segment holds reserveAfter bytes, tidwallStore.reserveTail
// gives both their whole room instead; at a roll, the sealed segment's
// copy, which tidwall/wal drops, becomes the new tail's (dropCache), so a
// log that keeps writing allocates (and the kernel zeroes) no new 4 MiB
// per segment. findTailCopy reaches the unexported fields by reflection,
// checks their types, and finds nothing when the layout is not v1.2.1's
// (TestReserveTail pins it, so an upgrade that changes it fails a test
// rather than quietly slowing down). The committer owns the store:
// nothing else touches tidwall/wal meanwhile. Readers copy the bytes
// of the tail's copy that the committer published (segment.mem): bytes
// tidwall/wal never changes once appended, until a roll reuses their
// storage, and the committer unpublishes them before it does.

// maxTailRoom bounds the room reserved, so that a large SegmentSize does
// not take its whole size at once; past it the copy grows as before.
const maxTailRoom = 16 << 20

// tailRoom is the room reserved for a tail segment of segSize bytes: the
// segment, and some room for the entry that takes it past segSize.
func tailRoom(segSize int64) int {
	return int(min(segSize, maxTailRoom)) + 64<<10
}

// reserveAfter is how many bytes a tail segment of segSize bytes holds
// before its copy gets its room: growing to it by append costs little,
// and a queue that writes less keeps less memory.
func reserveAfter(segSize int64) int {
	return int(min(segSize/4, 256<<10))
}

// tailCopy points at the fields of tidwall/wal's tail segment that hold
// its copy: the bytes (ebuf) and each entry's position (epos, a slice of
// an unexported type, reached through reflect). As a value taken out of
// them (take), it holds the storage itself.
type tailCopy struct {
	buf *[]byte       // segment.ebuf
	pos reflect.Value // segment.epos, settable; invalid when its type is not the expected one
}

// findTailCopy returns tidwall/wal's copy of its tail segment, or nil
// when it has none or its layout is not the one expected.
func findTailCopy(tw *twal.Log) *tailCopy {
	segs := reflect.ValueOf(tw).Elem().FieldByName("segments")
	if segs.Kind() != reflect.Slice || segs.Len() == 0 {
		return nil
	}
	tail := segs.Index(segs.Len() - 1)
	if tail.Kind() != reflect.Pointer || tail.IsNil() {
		return nil
	}
	b := tail.Elem().FieldByName("ebuf")
	if !b.IsValid() || b.Type() != reflect.TypeFor[[]byte]() {
		return nil
	}
	t := &tailCopy{buf: (*[]byte)(unsafe.Pointer(b.UnsafeAddr()))}
	if p := tail.Elem().FieldByName("epos"); p.IsValid() && isPosType(p.Type()) {
		t.pos = reflect.NewAt(p.Type(), unsafe.Pointer(p.UnsafeAddr())).Elem()
	}
	return t
}

// isPosType reports whether t is v1.2.1's []bpos: struct{ pos, end int }.
func isPosType(t reflect.Type) bool {
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Struct || t.Elem().NumField() != 2 {
		return false
	}
	e := t.Elem()
	return e.Field(0).Name == "pos" && e.Field(0).Type.Kind() == reflect.Int &&
		e.Field(1).Name == "end" && e.Field(1).Type.Kind() == reflect.Int
}

// take returns the storage of the copy, for a tail that comes after it;
// tidwall/wal drops its own reference when it clears its cache.
func (t *tailCopy) take() tailCopy {
	b := *t.buf
	out := tailCopy{buf: &b}
	if t.pos.IsValid() {
		out.pos = reflect.New(t.pos.Type()).Elem()
		out.pos.Set(t.pos)
	}
	return out
}

// fits reports whether the taken copy's storage suits a tail of room
// bytes: it has the room, and not much more. A copy regrown past twice
// the room (by an entry larger than the slack, or a SegmentSize above
// maxTailRoom) is left to the garbage collector rather than kept for
// every later tail.
func (t tailCopy) fits(room int) bool {
	return t.buf != nil && cap(*t.buf) >= room && cap(*t.buf) <= 2*room
}

// posLen and posCap are the taken copy's entry positions and their room;
// 0 when its layout is not the one expected.
func (t tailCopy) posLen() int {
	if !t.pos.IsValid() {
		return 0
	}
	return t.pos.Len()
}

func (t tailCopy) posCap() int {
	if !t.pos.IsValid() {
		return 0
	}
	return t.pos.Cap()
}

// expected is how many entry positions a tail of room bytes will hold,
// judged by the entries per byte so far, with a quarter to spare; the
// caller has seen reserveAfter bytes at least.
func (t *tailCopy) expected(room int) int {
	if !t.pos.IsValid() || len(*t.buf) == 0 {
		return 0
	}
	n := t.pos.Len() * room / len(*t.buf)
	return n + n/4
}

// reserve gives the copy room for room bytes and its positions room for
// entries, reusing spare's storage (the copy of a sealed segment, or the
// tail's before a reopen, whose contents no longer matter) where it is
// large enough and not more than twice that.
func (t *tailCopy) reserve(room, entries int, spare tailCopy) {
	buf := *t.buf
	if cap(buf) < room {
		var b []byte
		if spare.fits(room) {
			b = (*spare.buf)[:0]
		} else {
			b = make([]byte, 0, room)
		}
		*t.buf = append(b, buf...)
	}
	if !t.pos.IsValid() || t.pos.Cap() >= entries {
		return
	}
	var p reflect.Value
	if c := spare.posCap(); c >= entries && c <= 2*entries {
		p = spare.pos.Slice(0, 0)
	} else {
		p = reflect.MakeSlice(t.pos.Type(), 0, entries)
	}
	t.pos.Set(reflect.AppendSlice(p, t.pos))
}

// tidwall/wal keeps the list of its segments (Log.segments, each with the
// index of its first entry) and the log's first index (Log.firstIndex);
// its own TruncateFront rewrites the segment kept, so walq removes the
// front segments itself. Reopening tidwall/wal afterwards to drop them
// from its list would read the whole tail segment back from the file and
// parse every entry in it (a few milliseconds per 4 MiB, once per
// compaction). segmentList reaches the two fields by reflection instead,
// and cuts the list as tidwall/wal's TruncateFront does, when their types
// are v1.2.1's (TestTruncateFrontKeepsStore pins them). The segments
// dropped are sealed ones: tidwall/wal has closed their files and, since
// walq never calls its Read and clears its cache at each roll
// (dropCache), holds none of them anywhere else. The tail segment and its
// copy in memory are untouched.

// segmentList points at tidwall/wal's list of segments and first index.
type segmentList struct {
	segs  reflect.Value // Log.segments, settable; invalid when not found
	first *uint64       // Log.firstIndex
}

// findSegmentList returns tidwall/wal's list of segments, invalid when
// its layout is not the one expected.
func findSegmentList(tw *twal.Log) segmentList {
	v := reflect.ValueOf(tw).Elem()
	segs, first := v.FieldByName("segments"), v.FieldByName("firstIndex")
	if !isSegmentsType(segs) || !first.IsValid() || first.Kind() != reflect.Uint64 {
		return segmentList{}
	}
	return segmentList{
		segs:  reflect.NewAt(segs.Type(), unsafe.Pointer(segs.UnsafeAddr())).Elem(),
		first: (*uint64)(unsafe.Pointer(first.UnsafeAddr())),
	}
}

// isSegmentsType reports whether v is v1.2.1's []*segment, a segment
// being {path string; index uint64; ebuf []byte; epos []bpos} and nothing
// more: a segment that held anything else (a file, say) would keep it
// once dropped from the list.
func isSegmentsType(v reflect.Value) bool {
	if !v.IsValid() || v.Kind() != reflect.Slice || v.Type().Elem().Kind() != reflect.Pointer {
		return false
	}
	e := v.Type().Elem().Elem()
	if e.Kind() != reflect.Struct || e.NumField() != 4 {
		return false
	}
	return e.Field(0).Name == "path" && e.Field(0).Type.Kind() == reflect.String &&
		e.Field(1).Name == "index" && e.Field(1).Type.Kind() == reflect.Uint64 &&
		e.Field(2).Name == "ebuf" && e.Field(2).Type == reflect.TypeFor[[]byte]() &&
		e.Field(3).Name == "epos" && isPosType(e.Field(3).Type)
}

// find returns the position in the list of the segment whose first entry
// is index, or -1 when there is none or the list is not reachable.
func (l segmentList) find(index uint64) int {
	if !l.segs.IsValid() {
		return -1
	}
	for i := range l.segs.Len() {
		s := l.segs.Index(i)
		if s.IsNil() {
			return -1
		}
		if s.Elem().FieldByName("index").Uint() == index {
			return i
		}
	}
	return -1
}

// dropFront removes the first k segments from the list, in new storage
// (as tidwall/wal does), and makes the first one kept the log's first.
func (l segmentList) dropFront(k int) {
	if k == 0 {
		return
	}
	n := l.segs.Len()
	kept := reflect.MakeSlice(l.segs.Type(), 0, n-k)
	kept = reflect.AppendSlice(kept, l.segs.Slice(k, n))
	l.segs.Set(kept)
	*l.first = kept.Index(0).Elem().FieldByName("index").Uint()
}
