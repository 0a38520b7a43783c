package fuzz_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/walq/walq/queue"
)

// readOnlyView opens the queue directory dir read-only, which writes and
// repairs nothing, given the SegmentSize its writer used (without it, a
// read-only open takes no roll a crash tore at an entry boundary for
// one: wal/tornroll.go), and returns every message it holds, in any state, as
// "token/payload length" lines, sorted, for comparison with what a
// writable open then delivers from the same files.
func readOnlyView(dir string, segSize int64) ([]string, error) {
	q, err := queue.Open(dir, &queue.Options{ReadOnly: true, SegmentSize: segSize})
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var lines []string
	for st := queue.StateReady; st <= queue.StateDead; st++ {
		ms, err := q.Browse(st, 0, 1<<20)
		if err != nil {
			return nil, fmt.Errorf("browse %s: %w", st, err)
		}
		for _, m := range ms {
			full, err := q.Peek(m.Seq)
			if err != nil {
				return nil, fmt.Errorf("peek %s message %d: %w", st, m.Seq, err)
			}
			lines = append(lines, payloadLine(full.Payload))
		}
	}
	slices.Sort(lines)
	return lines, nil
}

// payloadLine is how readOnlyView and drainedView show one message.
func payloadLine(p []byte) string { return fmt.Sprintf("%s/%d", tokenOf(p), len(p)) }

// drainedView is readOnlyView's form of a drain's messages.
func drainedView(d drained) []string {
	lines := make([]string, 0, len(d.payloads))
	for _, p := range d.payloads {
		lines = append(lines, payloadLine(p))
	}
	slices.Sort(lines)
	return lines
}

// sameView compares a read-only open of a crash state, made before a
// writable open of the same files, with the drain of that writable open:
// the inspection must open what the writable open opens (unless the crash
// came before the queue held anything), and show every message it
// delivers, no other, with the same payload.
func sameView(ro []string, roErr error, d drained) error {
	if roErr != nil && d.recovery.SnapshotLSN == 0 && d.recovery.Replayed == 0 && len(d.payloads) == 0 {
		return nil // the crash came before the queue held anything: an inspection finds no queue there
	}
	if roErr != nil {
		return fmt.Errorf("a read-only open fails (%v) where the writable open opens", roErr)
	}
	want := drainedView(d)
	if !slices.Equal(ro, want) {
		return fmt.Errorf("a read-only open shows %d messages [%s], the writable open delivers %d [%s]",
			len(ro), strings.Join(ro, " "), len(want), strings.Join(want, " "))
	}
	return nil
}

// salvageCopy copies the queue directory dir/q to dir/qs and drains the
// copy with a salvaging open (Options.Salvage, as 'walq repair' opens),
// given the writer's SegmentSize. It returns the drain and its error, and
// an error of its own when the copy fails.
func salvageCopy(dir string, segSize int64) (drained, error, error) {
	if err := copyDir(filepath.Join(dir, "q"), filepath.Join(dir, "qs")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return drained{}, nil, err
	}
	o := drainOptionsAs(segSize)
	o.Salvage = true
	d, err := drainWith(filepath.Join(dir, "qs"), o)
	return d, err, nil
}

// repairCopy copies the queue directory dir/q to dir/qr, repairs the copy
// with queue.Repair given the writer's SegmentSize (and, as 'walq repair',
// every acked id kept and nothing dead-lettered), and drains it with a
// plain open given that SegmentSize too. It returns the drain and the
// repair's (or the drain's) error, and an error of its own when the copy
// fails.
func repairCopy(dir string, segSize int64) (drained, error, error) {
	if err := copyDir(filepath.Join(dir, "q"), filepath.Join(dir, "qr")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return drained{}, nil, err
	}
	o := &queue.Options{SegmentSize: segSize, DedupWindow: math.MaxInt64, MaxDeliveries: -1}
	if _, err := queue.Repair(filepath.Join(dir, "qr"), &queue.RepairOptions{Options: o}); err != nil {
		return drained{}, fmt.Errorf("repair: %w", err), nil
	}
	d, err := drainWith(filepath.Join(dir, "qr"), drainOptionsAs(segSize))
	return d, err, nil
}

// sameRepair compares the repair of a crash state with the plain open's
// drain d: a crash leaves nothing but a torn tail, which Verify calls
// repairable, so the repair must succeed and leave the messages the open
// delivers, no other (unless the crash came before the queue made its
// log: the repair then finds no queue, and says so).
func sameRepair(r drained, rErr error, d drained) error {
	if errors.Is(rErr, os.ErrNotExist) && d.recovery.SnapshotLSN == 0 && d.recovery.Replayed == 0 && len(d.payloads) == 0 {
		return nil // the crash came before the queue made its log: there is no queue to repair
	}
	if rErr != nil {
		return fmt.Errorf("'walq repair' fails (%v) where the plain open opens", rErr)
	}
	if a, b := drainedView(r), drainedView(d); !slices.Equal(a, b) {
		return fmt.Errorf("the repair leaves %d messages [%s], the plain open delivers %d [%s]",
			len(a), strings.Join(a, " "), len(b), strings.Join(b, " "))
	}
	return nil
}

// sameSalvage compares the salvaging open of a crash state with the plain
// open's drain d: a crash leaves no damage but a torn tail, which both cut
// alike, so the salvage must open and deliver the same messages. Except
// for a first segment with nothing valid left in it whose name a later
// segment's does not bound (the crash took every byte a roll's tail
// followed, and wrote junk): the salvage refuses to guess which LSNs it
// gave out (wal/doc.go, Damage under an empty tail), where the plain open
// takes it for a torn roll.
func sameSalvage(s drained, sErr error, d drained) error {
	if sErr != nil && errors.Is(sErr, queue.ErrCorrupt) && strings.Contains(sErr.Error(), "no record in the log before or after them") {
		return nil
	}
	if sErr != nil {
		return fmt.Errorf("a salvaging open fails (%v) where the plain open opens", sErr)
	}
	if a, b := drainedView(s), drainedView(d); !slices.Equal(a, b) {
		return fmt.Errorf("a salvaging open delivers %d messages [%s], the plain open %d [%s]",
			len(a), strings.Join(a, " "), len(b), strings.Join(b, " "))
	}
	return nil
}

// verifyAgrees compares queue.Verify of a crash state, run before the
// writable open that found rec, with that open: Verify returns ErrCorrupt
// only where Open would, so a state Open opens (holding anything) must
// verify with a nil error, its torn tail in Check.Log.Torn. Verify is
// given the writer's SegmentSize, as the open is, so a roll a crash tore
// at an entry boundary (the sealed segment whole, short of the empty
// tail's name) is a torn roll to both, never a missing segment
// (wal/tornroll.go).
func verifyAgrees(err error, rec queue.Recovery) error {
	if err == nil || rec.SnapshotLSN == 0 && rec.Replayed == 0 {
		return nil
	}
	return fmt.Errorf("Verify fails where the open opens (its torn tail: %v): %w", rec.Log.Torn, err)
}
