package queue

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walq/walq/index"
)

// The log record, as encodeRecord writes it and the log stores it (the
// log adds its own framing and checksum around it). These bytes are part
// of the on-disk format: a change breaks every existing queue directory.
// A record is a msgpack array of 15 fields, always all of them:
//
//	+------+----+-----+-------+----+-------+----+-----+-----+------+-------+--------+---------+---------+-----+------+
//	| 0x9f | Op | Seq | Lease | ID | Flags | At | Due | Enq | Size | Count | Reason | Headers | Payload | Key | Sort |
//	+------+----+-----+-------+----+-------+----+-----+-----+------+-------+--------+---------+---------+-----+------+
//
//	0x9f             fixarray of 15 (0x90|15); peekOp checks it
//	Op               1 byte, positive fixint 0x01..0x17; peekOp reads byte 1
//	Seq, Lease       uint: fixint 0x00..0x7f, or 0xcc/0xcd/0xce/0xcf then 1/2/4/8 bytes big endian
//	ID               str: fixstr 0xa0|n, or 0xd9/0xda/0xdb then a 1/2/4-byte length, then the bytes
//	Flags            uint (flagProducerID 1, flagSorted 2, flagCursor 4, flagRecount 8; any other bit is refused)
//	At, Due, Enq     int, unix ns: the shortest of fixint, 0xe0..0xff (negative fixint),
//	                 0xcc..0xcf (non-negative), 0xd0..0xd3 (negative) then big endian
//	Size, Count      uint
//	Reason           str
//	Headers          0xc0 (nil), or map 0x80|n / 0xde / 0xdf, then n pairs of str
//	Payload          bin: 0xc4/0xc5/0xc6 then a 1/2/4-byte length, then the bytes; 0xc0 when nil
//	Key              str
//	Sort             bin, as Payload: the encoded sort key
//
// Fields a kind does not use are zero, one byte each.

// goldenRecords is one record of every kind, with fields that exercise
// each encoding width. A record with headers has one, so that map order
// cannot vary.
func goldenRecords() []struct {
	name string
	rec  record
} {
	const at = 1_767_225_600_000_000_000 // 2026-01-01, unix ns
	return []struct {
		name string
		rec  record
	}{
		{"enqueue", record{Op: opEnqueue, ID: "job-1", Flags: flagProducerID, At: at, Due: at + 5e9,
			Headers: map[string]string{"trace": "abc"}, Payload: []byte("hello")}},
		{"enqueue-generated-id", record{Op: opEnqueue, ID: "0f8e2a4c-6b1d-4e3f-9a7b-5c2d1e0f9a8b", At: at, Payload: []byte{}}},
		{"lease", record{Op: opLease, Seq: 1, ID: "job-1", At: at + 1, Due: at + 30e9, Enq: at, Size: 60}},
		{"ack", record{Op: opAck, Seq: 1, Lease: 2, At: at + 2}},
		{"nack", record{Op: opNack, Seq: 1, Lease: 300, At: at + 3, Due: at + 60e9}},
		{"extend", record{Op: opExtend, Seq: 70_000, Lease: 5_000_000_000, At: at + 4, Due: at + 90e9}},
		{"expire", record{Op: opExpire, Seq: 1, Lease: 2, At: at + 5}},
		{"dead", record{Op: opDead, Seq: 1, Lease: 2, At: at + 6, Reason: "10 deliveries; last: nacked"}},
		{"requeue-dead", record{Op: opRequeueDead, Seq: 1, At: at + 7}},
		{"purge", record{Op: opPurge, Seq: 1, At: at + 8}},
		{"move", record{Op: opMove, Seq: 1, ID: "job-1", At: at + 9, Enq: at, Count: 3,
			Headers: map[string]string{"k": "v"}, Payload: []byte("hello")}},
		{"move-cursor", record{Op: opMove, Seq: 9, Flags: flagCursor, ID: "c", At: at + 9, Enq: at, Size: 42, Payload: []byte("x")}},
		{"close", record{Op: opClose, At: at + 10}},
		{"publish", record{Op: opPublish, Key: "user-7", Sort: []byte{0x80, 0, 0, 0, 0, 0, 0, 42}, At: at + 11, Payload: []byte("v")}},
		{"pull", record{Op: opPull, Key: "user-7", At: at + 12, Due: at + 30e9}},
		{"batch-ack", record{Op: opBatchAck, Lease: 14, At: at + 13}},
		{"batch-return", record{Op: opBatchReturn, Lease: 14, At: at + 14, Due: at + 1e9, Count: 10, Reason: "10 deliveries; last: nacked"}},
		{"batch-extend", record{Op: opBatchExtend, Lease: 14, At: at + 15, Due: at + 60e9}},
		{"batch-dead", record{Op: opBatchDead, Lease: 14, At: at + 16, Reason: "poison"}},
		{"value-revive", record{Op: opValueRevive, Seq: 13, At: at + 17}},
		{"value-purge", record{Op: opValuePurge, Seq: 13, At: at + 18}},
		{"advance", record{Op: opAdvance, Seq: 100, Flags: flagRecount, At: at + 19, Enq: 7, Due: 700}},
		{"drop", record{Op: opDrop, Seq: 13, Flags: flagSorted, Key: "user-7", Sort: []byte{1}, At: at + 20, Reason: "record lost to log damage"}},
		{"negative-times", record{Op: opAck, Seq: 1, Lease: 2, At: -1, Due: -200, Enq: -70_000}},
		{"move-dead", record{Op: opMoveDead, Seq: 9, Flags: flagCursor, ID: "c", At: at + 21, Enq: at, Size: 42,
			Count: 1, Reason: "poison", Payload: []byte("x")}},
		{"batch-ack-seqs", record{Op: opBatchAck, Lease: 300, At: at + 22, Key: "user-7",
			Payload: appendBatchSeqs(nil, 300, goldenBatch)}},
		{"batch-dead-seqs", record{Op: opBatchDead, Lease: 300, At: at + 23, Reason: "poison", Key: "user-7",
			Payload: appendBatchSeqs(nil, 300, goldenBatch)}},
		{"move-sorted", record{Op: opMove, Seq: 13, Flags: flagSorted, Key: "user-7", Sort: []byte{1}, At: at + 24, Enq: at,
			Payload: []byte("v")}},
		{"move-sorted-leased", record{Op: opMove, Seq: 13, Lease: 14, Flags: flagSorted, Key: "user-7", Sort: []byte{1},
			At: at + 25, Enq: at, Payload: []byte("v")}},
		{"value-dead", record{Op: opValueDead, Seq: 13, Key: "user-7", Sort: []byte{0x80, 0, 0, 0, 0, 0, 0, 42}, At: at + 26,
			Reason: "3 deliveries, limit 3; not delivered again"}},
		{"drop-sorted-leased", record{Op: opDrop, Seq: 13, Lease: 14, Flags: flagSorted, Key: "user-7", Sort: []byte{1},
			At: at + 27, Reason: "the index names another record"}},
	}
}

// goldenBatch is a batch's values in sort order, whose Seqs the golden
// batch-ack and batch-dead records pack: a delta back, a delta forward, a
// far one.
var goldenBatch = []index.SortedValue{{Seq: 299}, {Seq: 13}, {Seq: 14}, {Seq: 200}}

// TestRecordGolden pins the bytes of every kind of record
// (testdata/records.golden: one "name hex" line each) and checks that the
// pinned bytes decode to the same record. WALQ_WRITE_GOLDEN=1 rewrites
// the file.
func TestRecordGolden(t *testing.T) {
	path := filepath.Join("testdata", "records.golden")
	var got strings.Builder
	for _, g := range goldenRecords() {
		fmt.Fprintf(&got, "%s %x\n", g.name, encodeRecord(nil, &g.rec))
	}
	if os.Getenv("WALQ_WRITE_GOLDEN") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(got.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got.String(), "record encoding changed")

	pinned := readGoldenRecords(t, want)
	for _, g := range goldenRecords() {
		t.Run(g.name, func(t *testing.T) {
			b := pinned[g.name]
			require.Equal(t, g.rec.Op, peekOp(b))
			var r record
			require.NoError(t, decodeRecord(b, &r))
			require.Equal(t, g.rec, r)
		})
	}
}

// readGoldenRecords parses the golden file into name -> bytes.
func readGoldenRecords(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, hx, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, "line %q", sc.Text())
		rec, err := hex.DecodeString(hx)
		require.NoError(t, err)
		out[name] = rec
	}
	require.NoError(t, sc.Err())
	return out
}
