package wal_test

import (
	"sync"
	"testing"
	"time"

	"github.com/walq/walq/wal"
)

// closeGateFS wraps the real file system: once armed, the first Close of
// a read-only handle on a file that was removed meanwhile (a truncated
// segment's, whose last close frees its cached pages in the kernel) waits
// until the test releases it.
type closeGateFS struct {
	wal.OSFS
	reached chan struct{} // closed when the gated Close arrives
	open    chan struct{} // closed by release
	once    sync.Once     // release closes open once

	mu      sync.Mutex
	armed   bool            // the next Close of a removed file is the gated one
	removed map[string]bool // files removed since armed
}

// newCloseGateFS returns a close gate, not armed.
func newCloseGateFS() *closeGateFS {
	return &closeGateFS{reached: make(chan struct{}), open: make(chan struct{}), removed: map[string]bool{}}
}

// arm makes the next Close of a file removed from now on the gated one.
func (g *closeGateFS) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// reachedCh returns the channel closed when the gated Close arrives.
func (g *closeGateFS) reachedCh() <-chan struct{} { return g.reached }

// release lets the gated Close, and every one after it, through.
func (g *closeGateFS) release() { g.once.Do(func() { close(g.open) }) }

func (g *closeGateFS) Remove(name string) error {
	g.mu.Lock()
	if g.armed {
		g.removed[name] = true
	}
	g.mu.Unlock()
	return g.OSFS.Remove(name)
}

func (g *closeGateFS) Open(name string) (wal.File, error) {
	f, err := g.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return &closeGateFile{File: f, g: g, name: name}, nil
}

// gated reports whether closing name is the gated Close, and disarms the
// gate if so.
func (g *closeGateFS) gated(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.armed || !g.removed[name] {
		return false
	}
	g.armed = false
	return true
}

// closeGateFile is a read-only handle of a closeGateFS.
type closeGateFile struct {
	wal.File
	g    *closeGateFS
	name string // the path it was opened with
}

func (f *closeGateFile) Close() error {
	if f.g.gated(f.name) {
		close(f.g.reached)
		<-f.g.open
	}
	return f.File.Close()
}

// TestTruncateFrontCloseLetsWritersWrite: the last close of a truncated
// segment's file (slow: the kernel frees its cached pages) must not stop
// the other callers. While it is held, Append + Wait and a Read of the
// new record complete, under SyncNever and SyncAlways; the truncation
// then ends as usual.
func TestTruncateFrontCloseLetsWritersWrite(t *testing.T) {
	for _, mode := range syncModes {
		t.Run(mode.name, func(t *testing.T) {
			g := newCloseGateFS()
			l := openLog(t, t.TempDir(), &wal.Options{SegmentSize: 4 << 10, Sync: mode.sync, FS: g})
			defer closeLog(t, l)
			segs := fillSegments(t, l, 3)
			cut := segs[len(segs)-2].FirstLSN
			res := truncateHeld(t, l, g, cut, "the close of a removed segment")
			done := make(chan struct{})
			var err error
			go func() {
				defer close(done)
				var lsn wal.LSN
				var c *wal.Commit
				if lsn, c, err = l.Append([]byte("during the close")); err == nil {
					err = c.Wait()
				}
				if err == nil {
					_, err = l.Read(lsn)
				}
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				g.release()
				<-done
				t.Fatal("Append + Wait + Read blocked for 5 s by the close of a truncated segment")
			}
			g.release()
			if err != nil {
				t.Fatal(err)
			}
			if err := <-res; err != nil {
				t.Fatal(err)
			}
			if got := l.FirstLSN(); got != cut {
				t.Fatalf("FirstLSN %d after TruncateFront(%d)", got, cut)
			}
		})
	}
}
