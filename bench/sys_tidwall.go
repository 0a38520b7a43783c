package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tidwall/wal"
)

// Group limits of the WriteBatch+Sync prototype: a group closes when the
// committer has drained every waiting producer or reached either limit.
const (
	tidwallGroupItems = 4096
	tidwallGroupBytes = 4 << 20
)

func tidwallSystems() []System {
	return []System{
		{
			Name: "tidwall/write", Family: "tidwall", Mode: "write", Kind: KindLog,
			Durable: true, FIFO: true,
			Config: func(Hint) string {
				return "lower bound: bare tidwall/wal v1.2.1, default options (fsync in every Write), " +
					"one Write per op under a mutex"
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openTidwallWrite(dir) },
		},
		{
			Name: "tidwall/group", Family: "tidwall", Mode: "group", Kind: KindLog,
			Durable: true, FIFO: true,
			Config: func(Hint) string {
				return fmt.Sprintf("lower bound: group-commit prototype on bare tidwall/wal (NoSync): one committer "+
					"gathers every waiting producer (≤ %d ops, ≤ %d MiB), WriteBatch, then Sync; "+
					"each producer returns after the Sync covering its op", tidwallGroupItems, tidwallGroupBytes>>20)
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openTidwallGroup(dir) },
		},
	}
}

// tidwallLog holds what both variants share: the log and its scan.
type tidwallLog struct {
	log *wal.Log
}

func (t tidwallLog) NewConsumer() (Consumer, error) { return nil, errNoConsumer }

// Scan reads every entry in index order. Call it only when no write runs:
// tidwall/wal's Read is not safe alongside other calls.
func (t tidwallLog) Scan(fn func([]byte) error) error {
	first, err := t.log.FirstIndex()
	if err != nil {
		return err
	}
	last, err := t.log.LastIndex()
	if err != nil || first == 0 {
		return err
	}
	for i := first; i <= last; i++ {
		p, err := t.log.Read(i)
		if err != nil {
			return fmt.Errorf("tidwall: read %d: %w", i, err)
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// tidwallWrite is bare tidwall/wal with its default fsync per Write.
type tidwallWrite struct {
	tidwallLog
	mu   sync.Mutex // serialises Write; guards next
	next uint64     // index of the next entry; guarded by mu
}

func openTidwallWrite(dir string) (*tidwallWrite, error) {
	l, err := wal.Open(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("tidwall: open: %w", err)
	}
	last, err := l.LastIndex()
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return &tidwallWrite{tidwallLog: tidwallLog{l}, next: last + 1}, nil
}

func (t *tidwallWrite) Enqueue(_ context.Context, payload []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.log.Write(t.next, payload); err != nil {
		return err
	}
	t.next++
	return nil
}

func (t *tidwallWrite) Close() error { return t.log.Close() }

// tidwallGroup is the group-commit prototype: producers hand their payload
// to one committer goroutine, which owns the log.
type tidwallGroup struct {
	tidwallLog
	reqs chan groupReq // closed by Close
	done chan struct{} // closed when the committer has exited
}

// groupReq is one producer's op; reply receives the outcome of the group.
type groupReq struct {
	payload []byte
	reply   chan error
}

func openTidwallGroup(dir string) (*tidwallGroup, error) {
	l, err := wal.Open(dir, &wal.Options{NoSync: true})
	if err != nil {
		return nil, fmt.Errorf("tidwall: open: %w", err)
	}
	last, err := l.LastIndex()
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	t := &tidwallGroup{tidwallLog: tidwallLog{l}, reqs: make(chan groupReq, 1024), done: make(chan struct{})}
	go t.commit(last + 1)
	return t, nil
}

// commit is the committer loop. A failed write or sync is sticky: every
// later op gets the same error.
func (t *tidwallGroup) commit(next uint64) {
	defer close(t.done)
	var (
		group []groupReq
		batch wal.Batch
		err   error
	)
	for r := range t.reqs {
		group = t.gather(append(group[:0], r))
		if err == nil {
			batch.Clear()
			for i, g := range group {
				batch.Write(next+uint64(i), g.payload)
			}
			if err = t.log.WriteBatch(&batch); err == nil {
				err = t.log.Sync()
			}
			if err == nil {
				next += uint64(len(group))
			}
		}
		for _, g := range group {
			g.reply <- err
		}
	}
}

// gather adds the ops already waiting to group, up to the group limits.
func (t *tidwallGroup) gather(group []groupReq) []groupReq {
	size := len(group[0].payload)
	for len(group) < tidwallGroupItems && size < tidwallGroupBytes {
		select {
		case r, ok := <-t.reqs:
			if !ok {
				return group
			}
			group = append(group, r)
			size += len(r.payload)
		default:
			return group
		}
	}
	return group
}

func (t *tidwallGroup) Enqueue(_ context.Context, payload []byte) error {
	reply := make(chan error, 1)
	t.reqs <- groupReq{payload: payload, reply: reply}
	return <-reply
}

// Close stops the committer; call it after every Enqueue has returned.
func (t *tidwallGroup) Close() error {
	close(t.reqs)
	<-t.done
	return t.log.Close()
}
