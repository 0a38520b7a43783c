package queue_test

import (
	"context"
	"errors"
	"testing"

	"github.com/walq/walq/queue"
)

// TestReadOnlyKeepsWritersOut pins what Options.ReadOnly and ReadLog say
// of the directory lock: a read-only handle opened while no queue has the
// directory open holds its lock shared until Close, and a ReadLog (walq
// dump) holds it while it reads, so an Open for writing meanwhile fails
// with ErrLocked; a read-only handle opened beside a running queue
// (InUse) holds none, and that queue's next Open succeeds.
func TestReadOnlyKeepsWritersOut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := queue.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}

	// Beside the running queue: no lock held, a restart is not kept out.
	live, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !live.InUse() {
		t.Fatal("a read-only open beside a running queue: InUse false")
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q, err = queue.Open(dir, nil)
	if err != nil {
		t.Fatalf("an Open beside a read-only handle opened in use: %v, want success", err)
	}
	live.Close()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	// On an idle directory: the handle's shared lock keeps writers out
	// until its Close.
	ro, err := queue.Open(dir, &queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if ro.InUse() {
		t.Fatal("a read-only open of an idle directory: InUse true")
	}
	if w, err := queue.Open(dir, nil); !errors.Is(err, queue.ErrLocked) {
		if err == nil {
			w.Close()
		}
		t.Fatalf("an Open beside a read-only handle: %v, want ErrLocked", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	// ReadLog holds the lock while it reads, its callback included.
	var during error
	err = queue.ReadLog(dir, 0, func(queue.Record) error {
		w, err := queue.Open(dir, nil)
		if err == nil {
			w.Close()
		}
		during = err
		return errors.New("stop")
	})
	if err == nil || during == nil || !errors.Is(during, queue.ErrLocked) {
		t.Fatalf("an Open during ReadLog: %v (ReadLog: %v), want ErrLocked", during, err)
	}

	q, err = queue.Open(dir, nil)
	if err != nil {
		t.Fatalf("an Open once the readers are done: %v", err)
	}
	q.Close()
}
