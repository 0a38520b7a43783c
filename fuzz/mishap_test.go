package fuzz_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walq/walq/queue"
)

// TestSegmentFileMishaps damages whole segment files as hands, tools and
// file systems do, where damage_test.go flips bits and cuts inside them:
// a sealed segment emptied or left with a frame length alone (a file
// system that lost its blocks), renamed, replaced by its neighbour (a
// restore that put the wrong file back), random bytes or a valid entry
// appended after its last one (a write that went to the wrong file), an
// empty file named inside a segment. No crash of walq's leaves any of
// these. Open must refuse each (ErrCorrupt naming the way out, no file
// changed), or its drain must fail with ErrCorrupt at the damage, or
// deliver exactly what was enqueued, each payload whole; a salvaging open
// may refuse too, and must never deliver a payload that was not enqueued,
// a wrong one, or one twice.
func TestSegmentFileMishaps(t *testing.T) {
	rng, _ := testRand(t)
	img, want := storyImage(t, rng)
	segs := segmentFiles(img)
	i := len(segs) / 2
	first, middle, lastSealed, tail := segs[0], segs[i], segs[len(segs)-2], segs[len(segs)-1]
	named := func(index uint64) string { return fmt.Sprintf("log/%020d", index) }
	random := make([]byte, 100)
	for j := range random {
		random[j] = byte(rng.IntN(256))
	}
	cases := []struct {
		name   string
		damage func(m map[string][]byte)
	}{
		{"a middle segment emptied", func(m map[string][]byte) { m[middle] = nil }},
		{"a middle segment cut to 3 bytes", func(m map[string][]byte) { m[middle] = m[middle][:3] }},
		{"the first segment emptied", func(m map[string][]byte) { m[first] = nil }},
		{"the last sealed segment emptied", func(m map[string][]byte) { m[lastSealed] = nil }},
		{"a middle segment renamed one index up", func(m map[string][]byte) {
			m[named(segIndex(t, middle)+1)] = m[middle]
			delete(m, middle)
		}},
		{"a middle segment replaced by the one before", func(m map[string][]byte) { m[middle] = bytes.Clone(m[segs[i-1]]) }},
		{"two middle segments swapped", func(m map[string][]byte) { m[middle], m[segs[i-1]] = m[segs[i-1]], m[middle] }},
		{"random bytes appended to a middle segment", func(m map[string][]byte) { m[middle] = append(m[middle], random...) }},
		{"random bytes appended to the last sealed segment", func(m map[string][]byte) { m[lastSealed] = append(m[lastSealed], random...) }},
		{"the tail's first entry appended to the last sealed segment", func(m map[string][]byte) {
			e := parseSegment(m[tail])[0]
			m[lastSealed] = append(m[lastSealed], m[tail][e.off:e.end]...)
		}},
		{"the tail's first entry appended to a middle segment", func(m map[string][]byte) {
			e := parseSegment(m[tail])[0]
			m[middle] = append(m[middle], m[tail][e.off:e.end]...)
		}},
		{"the last sealed segment's last entry written twice", func(m map[string][]byte) {
			ents := parseSegment(m[lastSealed])
			e := ents[len(ents)-1]
			m[lastSealed] = append(m[lastSealed], m[lastSealed][e.off:e.end]...)
		}},
		{"an empty file named inside a middle segment", func(m map[string][]byte) { m[named(segIndex(t, middle)+1)] = nil }},
		{"an empty file named inside the last sealed segment", func(m map[string][]byte) { m[named(segIndex(t, lastSealed)+1)] = nil }},
	}
	refused := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(img)
			c.damage(bad)
			if checkMishapPlain(t, bad, want) {
				refused++
			}
			checkMishapSalvage(t, bad, want)
		})
	}
	t.Logf("%d of %d damaged images refused or failed at the damage", refused, len(cases))
}

// checkMishapPlain opens the image without Salvage: Open refuses it
// (ErrCorrupt naming the way out, no file changed), or the drain fails
// with ErrCorrupt, or it delivers every message enqueued, each once with
// its own payload. It reports whether the damage was found.
func checkMishapPlain(t *testing.T, img, want map[string][]byte) bool {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "q")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) || !strings.Contains(err.Error(), "walq repair") {
			t.Fatalf("Open: %v; want ErrCorrupt naming walq repair", err)
		}
		if after, err := readDir(dir); err != nil || !sameFiles(img, after) {
			t.Fatalf("a refused Open changed the directory (%v)", err)
		}
		return true
	}
	defer q.Close()
	n, err := drainRight(q, want)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) {
			t.Fatalf("drain: %v; want ErrCorrupt", err)
		}
		return true
	}
	if n != len(want) {
		t.Fatalf("the damaged directory opened and drained %d messages of %d, with no error; Recovery %+v", n, len(want), q.Recovery())
	}
	return false
}

// checkMishapSalvage opens the image with Salvage, which may refuse it
// with ErrCorrupt, and drains what it opened: never a wrong payload.
func checkMishapSalvage(t *testing.T, img, want map[string][]byte) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "s")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	o.Salvage = true
	q, err := queue.Open(dir, &o)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) {
			t.Fatalf("Open with Salvage: %v; want success or ErrCorrupt", err)
		}
		return
	}
	defer q.Close()
	if _, err := drainRight(q, want); err != nil {
		t.Fatalf("salvaged drain: %v", err)
	}
}

// drainRight leases every message of q, dead letters and expired leases
// included, and acks it; it fails on a payload that is not the one
// enqueued with its token, or a message delivered twice.
func drainRight(q *queue.Queue, want map[string][]byte) (int, error) {
	if _, err := q.RequeueExpired(); err != nil {
		return 0, err
	}
	if _, err := q.RequeueAllDead(); err != nil {
		return 0, err
	}
	got := map[string]bool{}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			return len(got), nil
		}
		if err != nil {
			return len(got), err
		}
		tok := tokenOf(m.Payload)
		if p, ok := want[tok]; !ok || !bytes.Equal(p, m.Payload) || got[tok] {
			return len(got), fmt.Errorf("message %s delivered with a wrong payload of %d bytes %q (twice: %v)",
				m.ID, len(m.Payload), m.Payload[:min(len(m.Payload), 20)], got[tok])
		}
		got[tok] = true
		if err := m.Ack(); err != nil {
			return len(got), err
		}
	}
}
