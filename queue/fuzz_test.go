package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/walq/walq/index"
)

// recordAllocBound is the most decodeRecord may allocate for an input of
// n bytes: every length it reads is checked against the input left, so
// anything beyond a small multiple of the input is a length taken on
// trust.
func recordAllocBound(n int) uint64 { return 256<<10 + 16*uint64(n) }

// stateAllocBound is the same for decodeState, which decodes index.Entry
// and index.DedupItem with msgpack's reflection: a string of a lying
// length costs a few MiB there (msgpack reads strings in 1 MiB chunks and
// grows the buffer by appending), once, before the read fails.
func stateAllocBound(n int) uint64 { return 8<<20 + 64*uint64(n) }

// allocated returns the bytes fn allocated.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// FuzzDecodeRecord decodes random bytes as a log record: no panic, no
// allocation far beyond the input, the same record from the copying and
// the aliasing decoders (with the ID's view made a string), and a record that decodes encodes back to one
// that decodes the same.
//
//	go test ./queue -run '^$' -fuzz '^FuzzDecodeRecord$' -fuzztime 10s
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range []*record{
		{Op: opEnqueue, ID: "id", Flags: flagProducerID, At: 1, Due: 2, Headers: map[string]string{"k": "v"}, Payload: []byte("payload")},
		{Op: opLease, Seq: 3, ID: "id", Enq: 1, Size: 40, At: 5, Due: 9},
		{Op: opAck, Seq: 3, Lease: 7, At: 8},
		{Op: opDead, Seq: 3, Lease: 7, Reason: "why"},
		{Op: opPublish, Key: "key", Sort: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Payload: []byte("v")},
		{Op: opBatchReturn, Lease: 9, Count: 3, Reason: "nacked"},
		{Op: opEnqueue, ID: strings.Repeat("i", 40), At: -5, Due: -200, Enq: -70000, Headers: map[string]string{}, Payload: []byte{}},
		{Op: opLease, Seq: 1 << 40, Lease: 300, At: math.MinInt64, Due: math.MaxInt64, Enq: -1 << 40, Size: 70000, Count: 1<<32 - 1, Payload: make([]byte, 300)},
		{Op: opEnqueue, Headers: manyHeaders(20), Payload: make([]byte, 70000)},
	} {
		f.Add(encodeRecord(nil, r))
	}
	f.Add([]byte{0x9f, 0x01, 0xc6, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r record
		var err error
		if n := allocated(func() { err = decodeRecord(b, &r) }); n > recordAllocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		var slow record
		if serr := decodeMsgpack(b, &slow); (err == nil) != (serr == nil) || !reflect.DeepEqual(r, slow) {
			t.Fatalf("decodeRecord and the msgpack decoder differ:\n%v %#v\n%v %#v", err, r, serr, slow)
		}
		var aliased record
		if aerr := decodeRecordAliased(b, &aliased); (err == nil) != (aerr == nil) || !reflect.DeepEqual(r, aliased) {
			t.Fatalf("decodeRecord and decodeRecordAliased differ:\n%v %#v\n%v %#v", err, r, aerr, aliased)
		}
		var lazy record
		id, lerr := decodeRecordAliasedID(b, &lazy)
		if lazy.ID == "" {
			lazy.ID = string(id)
		} else if id != nil {
			t.Fatalf("decodeRecordAliasedID set the ID %q and returned a view %q", lazy.ID, id)
		}
		if (err == nil) != (lerr == nil) || !reflect.DeepEqual(r, lazy) {
			t.Fatalf("decodeRecord and decodeRecordAliasedID differ:\n%v %#v\n%v %#v", err, r, lerr, lazy)
		}
		if err != nil {
			return
		}
		var again record
		if err := decodeRecord(encodeRecord(nil, &r), &again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(r), normal(again)) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", r, again)
		}
	})
}

// manyHeaders returns n headers (16 or more need a map16).
func manyHeaders(n int) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h[fmt.Sprint("h", i)] = strings.Repeat("v", i)
	}
	return h
}

// normal makes empty and nil fields compare equal.
func normal(r record) record {
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
	if len(r.Payload) == 0 {
		r.Payload = nil
	}
	if len(r.Sort) == 0 {
		r.Sort = nil
	}
	return r
}

// FuzzDecodeState decodes random bytes as a snapshot body (the part after
// the file's header and checksum): no panic and no allocation far beyond
// the input. The seeds are real bodies.
//
//	go test ./queue -run '^$' -fuzz '^FuzzDecodeState$' -fuzztime 10s
func FuzzDecodeState(f *testing.F) {
	o := &Options{}
	st := newState(o)
	st.table.Put(index.Entry{Seq: 1, Loc: 1, ID: "a", State: index.Leased, Lease: 2, Deliveries: 1})
	st.dedup.Put(index.DedupItem{ID: "a", Seq: 1})
	st.sorted.Publish(index.SortedValue{Key: "k", Sort: []byte{1}, Seq: 3, Loc: 3})
	st.sorted.Publish(index.SortedValue{Key: "k", Sort: []byte{2}, Seq: 4, Loc: 4})
	st.sorted.Take("k", 5, 1, 2)
	st.last = 5
	body, err := st.freeze().encode()
	if err != nil {
		f.Fatal(err)
	}
	if got, err := decodeState(body, o); err != nil || got.sorted.Counts().Batches != 1 || got.table.Len() != 1 {
		f.Fatalf("a real body does not decode back: %v", err)
	}
	f.Add(body)
	empty, _ := newState(o).freeze().encode()
	f.Add(empty)
	f.Add(hugeBatch())
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := allocated(func() { _, _ = decodeState(b, o) }); n > stateAllocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
	})
}

// hugeBatch is a snapshot body with one leased batch whose value array
// claims 2^24 elements but holds none.
func hugeBatch() []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	_ = enc.EncodeMulti(snapshotVersion, uint64(1), uint64(1), int64(0), int64(0), false, &counters{})
	_ = enc.EncodeArrayLen(0) // entries
	_ = enc.EncodeArrayLen(0) // dedup
	_ = enc.EncodeArrayLen(0) // pending
	_ = enc.EncodeArrayLen(0) // dead
	_ = enc.EncodeArrayLen(1) // batches
	_ = enc.EncodeArrayLen(5) // one index.Batch, as an array
	_ = enc.EncodeMulti(uint64(2), "k", int64(0), int64(0))
	_ = enc.EncodeArrayLen(1 << 24) // its values: a length, and nothing after it
	return buf.Bytes()
}

// TestHugeBatchIsCorruptNotAllocated is a regression test found by
// FuzzDecodeState: a snapshot body whose leased batch claimed 2^24 values
// made decodeState allocate 4 GB (msgpack pre-allocated the claimed
// slice); larger claims would crash the process instead of failing with
// ErrCorrupt.
func TestHugeBatchIsCorruptNotAllocated(t *testing.T) {
	b := hugeBatch()
	var err error
	if n := allocated(func() { _, err = decodeState(b, &Options{}) }); n > stateAllocBound(len(b)) {
		t.Fatalf("decoding %d bytes allocated %d", len(b), n)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decodeState: %v, want ErrCorrupt", err)
	}
}
