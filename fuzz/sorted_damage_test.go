package fuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walq/walq/internal/testhook"
	"github.com/walq/walq/queue"
)

// TestSortedMidLogDamage is TestMidLogDamage for a sorted queue whose log
// holds publishes, pulls, acks, nacks with and without delay,
// dead-letterings, revived and purged dead values, and a snapshot (its
// compactions copy no value forward and cut no segment): an
// entry of a segment is damaged (a bit flipped in its frame length, CRC,
// first LSN or a record, 16 bytes zeroed), or a sealed segment is cut
// short, zeroed a sector or removed; a sample of the cases, shuffled.
// Without Salvage the open or the drain (leases ended, dead values
// revived, every value pulled) must fail with ErrCorrupt naming the file,
// or drain exactly what the undamaged image drains while Verify reports
// the damage. With Salvage the open must succeed and the drain must hand
// out each value once, with the exact payload it was published with,
// under its own key and sort key; Stats must count what the pulls
// return; and the directory must then open without Salvage and hold
// nothing more. What a salvage may lose or bring back is the damage's;
// what it hands out must never be wrong.
func TestSortedMidLogDamage(t *testing.T) {
	rng, _ := testRand(t)
	img, want := sortedDamageImage(t, rng)
	cases := segmentDamage(rng, img, false)
	rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	cases = cases[:min(len(cases), envInt(t, "WALQ_SORTED_DAMAGE_CASES", scaled(400, 4)))]
	whole := sortedDrainTokens(t, img, damageCase{name: "no damage"}, want)
	delivered := 0
	outcomes := map[string]int{}
	for _, c := range cases {
		outcomes[checkSortedStrictDamage(t, img, c, want, whole)]++
		delivered += checkSortedSalvageDamage(t, img, c, want)
		if t.Failed() {
			return
		}
	}
	t.Logf("SUMMARY sorted damage: cases=%d without Salvage %v; with Salvage %d values delivered", len(cases), outcomes, delivered)
}

// checkSortedStrictDamage opens the image with c applied without Salvage
// and drains it: the open or the drain must fail with ErrCorrupt naming
// the file (a removed segment: a neighbour), or the drain must return
// exactly what the undamaged image's drain returns (whole), with Verify
// reporting the damage. It returns the outcome.
func checkSortedStrictDamage(t *testing.T, img map[string][]byte, c damageCase, want map[string][]byte, whole map[string]bool) string {
	t.Helper()
	names := []string{filepath.Base(c.file)}
	if c.damage == nil {
		names = neighbours(img, c.file)
	}
	got, err := sortedDrain(t, img, c, want, false)
	if err != nil {
		if !errors.Is(err, queue.ErrCorrupt) || !mentionsAny(err, names) {
			t.Errorf("%s: the error must wrap queue.ErrCorrupt and name %v: %v", c.name, names, err)
		}
		return "ErrCorrupt"
	}
	if n := tokensApart(got, whole); n > 0 {
		t.Errorf("%s: opened and drained without Salvage %d values, the undamaged image %d; %d are in one drain only",
			c.name, len(got), len(whole), n)
		return "wrong"
	}
	if _, err := queue.Verify(writeAgain(t, img, c), nil); !errors.Is(err, queue.ErrCorrupt) || !mentionsAny(err, names) {
		t.Errorf("%s: the damage did not matter to the drain, but Verify must report it naming %v: %v", c.name, names, err)
	}
	return "unneeded bytes: Verify ErrCorrupt"
}

// sortedDrainTokens drains the image with c applied without Salvage and
// returns the tokens pulled; any error fails the test.
func sortedDrainTokens(t *testing.T, img map[string][]byte, c damageCase, want map[string][]byte) map[string]bool {
	t.Helper()
	got, err := sortedDrain(t, img, c, want, false)
	if err != nil {
		t.Fatalf("%s: drain: %v", c.name, err)
	}
	return got
}

// sortedDamageImage builds a crash image of a sorted queue in 4 KiB
// segments with a snapshot, and returns it with the payload of every value
// published, by token.
func sortedDamageImage(t *testing.T, rng *rand.Rand) (map[string][]byte, map[string][]byte) {
	t.Helper()
	dir, s := openSortedImage(t)
	defer s.Close()
	want := map[string][]byte{}
	n := 0
	for round := 0; round < 8; round++ {
		for k := 0; k < 20; k++ {
			key := fmt.Sprintf("k%d", rng.IntN(9))
			sort := int64(rng.IntN(11) - 5)
			tok := sortedValueToken(n, key, sort)
			n++
			p := payload(tok, 20+rng.IntN(140))
			if err := s.Publish(context.Background(), sort, key, p); err != nil {
				t.Fatal(err)
			}
			want[tok] = p
		}
		bs, err := s.TryPull(12)
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range bs {
			switch (j + round) % 6 {
			case 0, 1:
				err = b.Ack()
			case 2:
				err = b.Nack(0)
			case 3:
				err = b.Nack(time.Hour)
			case 4:
				err = b.DeadLetter("test")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		ds, err := s.DeadValues(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for j, d := range ds {
			switch {
			case j%3 == 0:
				err = s.RequeueDeadValue(d)
			case j%5 == 1:
				err = s.PurgeDeadValue(d)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if round%3 == 2 {
			if err := s.Compact(); err != nil {
				t.Fatal(err)
			}
		}
	}
	img, err := quietDir(dir) // a crash image: the batches left leased stay leased
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshotFiles(img)) != 1 || len(segmentFiles(img)) < 4 {
		t.Fatalf("image has %d snapshots, %d segments", len(snapshotFiles(img)), len(segmentFiles(img)))
	}
	return img, want
}

// checkSortedSalvageDamage opens the image with c applied with Salvage and
// drains it (see TestSortedMidLogDamage); it returns how many values the
// drain pulled.
func checkSortedSalvageDamage(t *testing.T, img map[string][]byte, c damageCase, want map[string][]byte) int {
	t.Helper()
	got, err := sortedDrain(t, img, c, want, true)
	if err != nil {
		t.Errorf("%s: with Salvage: %v", c.name, err)
	}
	return len(got)
}

// sortedDrain writes the image with c applied, opens it (with Salvage or
// not), ends the leases, revives the dead values and pulls every value,
// checking each against want; with Salvage, the directory must then open
// without it and hold nothing. It returns the tokens pulled. A wrong
// payload or a value pulled twice fails the test.
func sortedDrain(t *testing.T, img map[string][]byte, c damageCase, want map[string][]byte, salvage bool) (map[string]bool, error) {
	t.Helper()
	dir := writeDamaged(t, "q", img, c)
	defer os.RemoveAll(dir)
	o := drainOptions()
	o.Salvage = salvage
	got := map[string]bool{}
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		return got, fmt.Errorf("open: %w", err)
	}
	if err := pullAllChecked(t, s, c, want, got); err != nil {
		s.Close()
		return got, err
	}
	if err := s.Close(); err != nil {
		return got, fmt.Errorf("close: %w", err)
	}
	if salvage {
		if d, err := drainSorted(dir); err != nil || len(d.tokens) != 0 {
			t.Errorf("%s: reopen without Salvage after the salvage and a full drain: %d values, %v", c.name, len(d.tokens), err)
		}
	}
	return got, nil
}

// pullAllChecked ends s's leases, revives its dead values and pulls and
// acks every value, adding its token to got.
func pullAllChecked(t *testing.T, s *queue.Sorted[int64], c damageCase, want map[string][]byte, got map[string]bool) error {
	t.Helper()
	if _, err := s.RequeueExpired(); err != nil {
		return fmt.Errorf("RequeueExpired: %w", err)
	}
	if _, err := s.RequeueAllDead(); err != nil {
		return fmt.Errorf("RequeueAllDead: %w", err)
	}
	pending := s.Stats().SortedPending
	for {
		bs, err := s.TryPull(1 << 20)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		if err != nil {
			return fmt.Errorf("pull after %d values: %w", len(got), err)
		}
		for _, b := range bs {
			for _, v := range b.Values {
				tok := tokenOf(v.Payload)
				if p, ok := want[tok]; !ok || !bytes.Equal(p, v.Payload) || !strings.HasSuffix(tok, fmt.Sprintf("/%s/%d", b.Key, v.Sort)) {
					t.Fatalf("%s: value of key %q sort %d pulled with a wrong payload of %d bytes %q", c.name, b.Key, v.Sort,
						len(v.Payload), v.Payload[:min(len(v.Payload), 24)])
				}
				if got[tok] {
					t.Fatalf("%s: value %s pulled twice in one drain", c.name, tok)
				}
				got[tok] = true
			}
			if err := b.Ack(); err != nil {
				return fmt.Errorf("ack: %w", err)
			}
		}
	}
	if len(got) != pending {
		t.Errorf("%s: Stats said %d pending, the pulls returned %d", c.name, pending, len(got))
	}
	return nil
}

// tokensApart returns how many tokens are in one of a and b only.
func tokensApart(a, b map[string]bool) int {
	n := 0
	for tok := range a {
		if !b[tok] {
			n++
		}
	}
	for tok := range b {
		if !a[tok] {
			n++
		}
	}
	return n
}

// openSortedImage opens a sorted queue in a new scratch directory as the
// damage images of sorted queues are written: 4 KiB segments,
// compactions only when the test asks, leases that never run out.
func openSortedImage(t *testing.T) (string, *queue.Sorted[int64]) {
	t.Helper()
	dir := scratchDir(t)
	o := queue.Options{SegmentSize: 4096, ManualRequeue: true, SnapshotBytes: 1 << 30, MaxDeliveries: 3,
		AckTimeout: time.Hour}
	testhook.SetManualCompaction(&o)
	s, err := queue.OpenSorted[int64](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return dir, s
}
