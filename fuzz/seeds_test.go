package fuzz_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/recovery"
)

// seedDirs are the committed seed corpora of every fuzz target, by
// directory relative to fuzz/.
var seedDirs = []string{
	"testdata/fuzz/FuzzQueueModel",
	"testdata/fuzz/FuzzSegment",
	"testdata/fuzz/FuzzSnapshotFile",
	"../queue/testdata/fuzz/FuzzDecodeRecord",
	"../queue/testdata/fuzz/FuzzDecodeState",
	"../recovery/testdata/fuzz/FuzzDecode",
	"../recovery/testdata/fuzz/FuzzEncode",
	"testdata/fuzz/FuzzSortedModel",
	"../wal/testdata/fuzz/FuzzDecodeEntry",
}

// TestSeedCorpus checks that every fuzz target has its committed seeds. With
// WALQ_WRITE_SEEDS=1 it (re)writes them first, from real queue logs and
// snapshots:
//
//	WALQ_WRITE_SEEDS=1 go test ./fuzz -run '^TestSeedCorpus$'
//
// go test runs every seed of a target as a test case, so the seeds are
// also regression tests; inputs that a fuzzing run found failing are saved
// next to them by go test itself.
func TestSeedCorpus(t *testing.T) {
	if os.Getenv("WALQ_WRITE_SEEDS") != "" {
		writeSeeds(t)
	}
	for _, d := range seedDirs {
		if m, _ := filepath.Glob(filepath.Join(d, "*")); len(m) < 2 {
			t.Errorf("%s holds %d seeds; regenerate: WALQ_WRITE_SEEDS=1 go test ./fuzz -run '^TestSeedCorpus$'", d, len(m))
		}
	}
}

// writeSeeds writes the seed corpora.
func writeSeeds(t *testing.T) {
	valid := validLog(t)
	for i, s := range modelSeeds {
		writeSeed(t, seedDirs[0], fmt.Sprint("model", i), s)
	}
	for mode := byte(0); mode < 4; mode++ {
		writeSeed(t, seedDirs[1], fmt.Sprint("valid", mode), mode, valid)
	}
	ents := parseSegment(valid)
	writeSeed(t, seedDirs[1], "torn", byte(1), valid[ents[len(ents)-1].off:ents[len(ents)-1].end-3])
	var recs []byte
	for _, e := range ents {
		for _, r := range e.recs {
			recs = append(recs, byte(len(r)))
			recs = append(recs, r...)
			writeSeed(t, seedDirs[3], fmt.Sprint("record-lsn", e.first, "-", len(r)), r)
		}
	}
	writeSeed(t, seedDirs[1], "records", byte(3), recs)
	for i, s := range sortedSeeds {
		writeSeed(t, seedDirs[7], fmt.Sprint("sorted", i), s)
	}
	for _, e := range ents {
		frame := valid[e.off:e.end]
		_, k := binary.Uvarint(frame)
		writeSeed(t, seedDirs[8], fmt.Sprint("entry-lsn", e.first), frame[k:])
		writeSeed(t, seedDirs[8], fmt.Sprint("frame-lsn", e.first), frame)
	}
	for i, body := range realSnapshotBodies(t) {
		writeSeed(t, seedDirs[2], fmt.Sprint("body", i), true, body)
		writeSeed(t, seedDirs[2], fmt.Sprint("file", i), false, recovery.Encode(9, body))
		writeSeed(t, seedDirs[4], fmt.Sprint("body", i), body)
		writeSeed(t, seedDirs[5], fmt.Sprint("file", i), recovery.Encode(uint64(100+i), body))
		writeSeed(t, seedDirs[6], fmt.Sprint("body", i), uint64(100+i), body, uint(i*77))
	}
}

// writeSeed writes one corpus file in go test's format, named by content.
func writeSeed(t *testing.T, dir, what string, vals ...any) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", v)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		case uint64:
			fmt.Fprintf(&b, "uint64(%d)\n", v)
		case uint:
			fmt.Fprintf(&b, "uint(%d)\n", v)
		default:
			t.Fatalf("seed value of type %T", v)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, fmt.Sprintf("seed-%s-%x", what, sum[:4]))
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
