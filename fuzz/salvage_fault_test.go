package fuzz_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/walq/walq/internal/faultfs"
	"github.com/walq/walq/queue"
)

// TestSalvageInterrupted stops a salvaging Open at each operation it makes
// on the disk (internal/faultfs fails it, a write after half its bytes, and
// the Open gives up), as a crash or a full disk in the middle of a repair
// would: the salvage writes as it goes (the ends of crashed leases, the
// messages it copies past the damage, a snapshot, the truncation that cuts
// the damaged segments off). Whatever it left, the next salvaging Open
// must deliver exactly what one uninterrupted salvage of the same damage
// delivers, each payload whole and once: an interrupted salvage loses
// nothing more, and brings back nothing it had given up.
func TestSalvageInterrupted(t *testing.T) {
	rng, _ := testRand(t)
	img, want := storyImage(t, rng)
	segs := segmentFiles(img)
	mid := segs[len(segs)/2]
	cases := []struct {
		name   string
		damage func(m map[string][]byte)
	}{
		{"bit flipped in a middle segment, valid entries after it", func(m map[string][]byte) {
			ents := parseSegment(m[mid])
			e := ents[len(ents)/2]
			m[mid][e.end-2] ^= 0x10
		}},
		{"middle segment deleted", func(m map[string][]byte) { delete(m, mid) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := maps(img)
			c.damage(bad)
			ref := salvagedTokens(t, bad, nil, want)
			faults := 0
			for n := 1; ; n++ {
				fsys := faultfs.New(n)
				dir := filepath.Join(scratchDir(t), "q")
				if err := writeDir(dir, bad); err != nil {
					t.Fatal(err)
				}
				o := drainOptions()
				o.Salvage, o.FS = true, fsys
				if q, err := queue.Open(dir, &o); err == nil {
					q.Close() // the fault may come here, or never
				}
				op, hit := fsys.Hit()
				if !hit {
					break
				}
				faults++
				left, err := readDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				checkPlainAfterSalvage(t, left, ref, want, n)
				got := salvagedTokens(t, nil, &dir, want)
				if !slices.Equal(got, ref) {
					t.Fatalf("salvage stopped at operation %d (%s %s), then salvaged again: %d messages, want the %d an uninterrupted salvage delivers; missing %v, extra %v",
						n, op.Kind, filepath.Base(op.Path), len(got), len(ref), minus(ref, got), minus(got, ref))
				}
			}
			if faults < 5 {
				t.Fatalf("the salvage made %d operations; the test needs it to write", faults)
			}
			t.Logf("salvage stopped at each of %d operations; each time the next salvage delivered the same %d messages", faults, len(ref))
		})
	}
}

// salvagedTokens opens img (written to a fresh directory), or the
// directory *dir, with Salvage and drains it with drainRight (payloads
// checked against want); it returns the tokens delivered, sorted.
func salvagedTokens(t *testing.T, img map[string][]byte, dir *string, want map[string][]byte) []string {
	t.Helper()
	d := ""
	if dir != nil {
		d = *dir
	} else {
		d = filepath.Join(scratchDir(t), "ref")
		if err := writeDir(d, img); err != nil {
			t.Fatal(err)
		}
	}
	o := drainOptions()
	o.Salvage = true
	q, err := queue.Open(d, &o)
	if err != nil {
		t.Fatalf("Open with Salvage: %v", err)
	}
	defer q.Close()
	var toks []string
	if _, err := q.RequeueExpired(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RequeueAllDead(); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatalf("salvaged drain after %d messages: %v", len(toks), err)
		}
		tok := tokenOf(m.Payload)
		if p, ok := want[tok]; !ok || string(p) != string(m.Payload) || slices.Contains(toks, tok) {
			t.Fatalf("salvaged drain: message %s with a wrong payload of %d bytes %q, or twice", m.ID, len(m.Payload), m.Payload[:min(len(m.Payload), 20)])
		}
		toks = append(toks, tok)
		if err := m.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(toks)
	return toks
}

// checkPlainAfterSalvage opens what an interrupted salvage left without
// Salvage: it may refuse it (ErrCorrupt), or fail at the damage when a
// delivery reads it (ErrCorrupt), or deliver exactly the messages ref, each
// with its own payload.
func checkPlainAfterSalvage(t *testing.T, img map[string][]byte, ref []string, want map[string][]byte, n int) {
	t.Helper()
	dir := filepath.Join(scratchDir(t), "plain")
	if err := writeDir(dir, img); err != nil {
		t.Fatal(err)
	}
	o := drainOptions()
	q, err := queue.Open(dir, &o)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) {
			t.Fatalf("salvage stopped at operation %d, then a plain Open: %v; want success or ErrCorrupt", n, err)
		}
		return
	}
	defer q.Close()
	sub := make(map[string][]byte, len(ref))
	for _, tok := range ref {
		sub[tok] = want[tok]
	}
	got, err := drainRight(q, sub)
	if err != nil && !errors.Is(err, queue.ErrCorrupt) {
		t.Fatalf("salvage stopped at operation %d, then a plain Open's drain: %v", n, err)
	}
	if err == nil && got != len(ref) {
		t.Fatalf("salvage stopped at operation %d, then a plain Open drained %d messages, want the %d the salvage delivers", n, got, len(ref))
	}
}

// minus returns the tokens of a that b lacks.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
