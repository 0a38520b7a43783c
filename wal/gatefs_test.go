package wal_test

import (
	"path/filepath"
	"strings"
	"sync"

	"github.com/walq/walq/wal"
)

// gateFS wraps a wal.FS (the real one, or a crash file system) with one
// gate: once armed, the first Remove of a segment file, or the first
// SyncDir after one (at picks which), waits until the test releases it,
// then fails with the error given there (nil: it is made). before, when
// set, runs before each Remove and SyncDir the gate lets through, the
// gated one included once released (a power-loss test counts a
// truncation's steps with it). The StoreOp notices tidwall/wal's writes
// give reach the wrapped FS when it takes them.
type gateFS struct {
	wal.FS
	at      string        // "unlink" or "dirsync"
	reached chan struct{} // closed when the gated operation arrives
	open    chan struct{} // closed by release
	once    sync.Once     // release closes open once
	before  func()        // run before each Remove and SyncDir made; nil: none

	mu      sync.Mutex
	armed   bool  // the next matching operation is the gated one
	removed bool  // a segment was removed since armed
	fail    error // what the gated operation returns once released
}

// newGateFS returns a gate over fsys, not armed.
func newGateFS(fsys wal.FS, at string) *gateFS {
	return &gateFS{FS: fsys, at: at, reached: make(chan struct{}), open: make(chan struct{})}
}

// arm makes the next matching operation the gated one.
func (g *gateFS) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// reachedCh returns the channel closed when the gated operation arrives.
func (g *gateFS) reachedCh() <-chan struct{} { return g.reached }

// gated reports whether the operation of kind is the gated one, and
// disarms the gate if so.
func (g *gateFS) gated(kind, name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed {
		return false
	}
	segment := kind == "unlink" && !strings.Contains(filepath.Base(name), ".")
	if segment {
		g.removed = true
	}
	if (g.at == "unlink" && segment) || (g.at == "dirsync" && kind == "dirsync" && g.removed) {
		g.armed = false
		return true
	}
	return false
}

// pass holds the operation of kind on name at the gate if it is the gated
// one, then runs before; an error means the gated operation fails so.
func (g *gateFS) pass(kind, name string) error {
	if g.gated(kind, name) {
		close(g.reached)
		<-g.open
		g.mu.Lock()
		err := g.fail
		g.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if g.before != nil {
		g.before()
	}
	return nil
}

func (g *gateFS) Remove(name string) error {
	if err := g.pass("unlink", name); err != nil {
		return err
	}
	return g.FS.Remove(name)
}

func (g *gateFS) SyncDir(name string) error {
	if err := g.pass("dirsync", name); err != nil {
		return err
	}
	return g.FS.SyncDir(name)
}

// StoreOp hands the notice of a store write to the wrapped FS if it takes
// them (a crash file system fails them after its crash).
func (g *gateFS) StoreOp(op string) error {
	if o, ok := g.FS.(interface{ StoreOp(op string) error }); ok {
		return o.StoreOp(op)
	}
	return nil
}

// release opens the gate, once; the gated operation then returns fail.
func (g *gateFS) release(fail error) {
	g.once.Do(func() {
		g.mu.Lock()
		g.fail = fail
		g.mu.Unlock()
		close(g.open)
	})
}
