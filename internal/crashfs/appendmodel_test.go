package crashfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// This file holds, unchanged but for its names, the model as it was before
// overwrites were modelled: it tore appends only and gave a file rewritten
// since its sync its synced bytes. TestAppendsAsBefore compares the model
// with it on workloads that only append.

// materializeAppends is Materialize under the append-only model.
func (fsys *FS) materializeAppends(dst string, rng *rand.Rand) (State, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if !fsys.mu.crashed {
		return State{}, errors.New("crashfs: Materialize before the crash")
	}
	m := &appendMaterializer{fsys: fsys, rng: rng, names: rng.IntN(3)}
	if err := m.dir(".", dst); err != nil {
		return State{}, err
	}
	return State{Holes: m.holes, Lost: m.lost, Kept: m.kept, Desc: fmt.Sprintf("names %s; %s",
		[]string{"as last fsynced", "as cached", "mixed"}[m.names], strings.Join(m.desc, "; "))}, nil
}

// appendMaterializer builds one crash state.
type appendMaterializer struct {
	fsys  *FS
	rng   *rand.Rand
	names int      // namesSynced, namesCached or namesMixed
	holes bool     // a file got a hole
	lost  []string // files whose content is not what was written
	kept  []string // files that kept unsynced bytes
	desc  []string // what was chosen where it mattered
}

// dir writes directory rel of the crash state at dst.
func (m *appendMaterializer) dir(rel, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	durable, image := m.fsys.mu.durable[rel], m.fsys.mu.image[rel]
	all := make(map[string]*inode, len(image))
	for n, ino := range durable {
		all[n] = ino
	}
	for n, ino := range image {
		all[n] = ino
	}
	for _, name := range sortedNames(all) {
		ino := m.pick(filepath.Join(rel, name), durable[name], image[name])
		if ino == nil {
			continue
		}
		var err error
		if ino.dir {
			err = m.dir(filepath.Join(rel, name), filepath.Join(dst, name))
		} else {
			b := m.content(filepath.Join(rel, name), ino)
			if cur, ok := m.fsys.mu.content[ino]; ok && !bytes.Equal(b, cur) {
				m.lost = append(m.lost, filepath.Join(rel, name))
			}
			err = os.WriteFile(filepath.Join(dst, name), b, 0o600)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pick chooses what name holds: the file its directory's last fsync saw
// (d), or the one it held at the crash (c); nil means no such name.
func (m *appendMaterializer) pick(name string, d, c *inode) *inode {
	if d == c {
		return d
	}
	ino := d
	switch {
	case m.names == namesCached, m.names == namesMixed && m.rng.IntN(2) == 0:
		ino = c
	}
	switch {
	case ino == nil && d != nil:
		m.desc = append(m.desc, name+" removed")
	case ino == nil:
		m.desc = append(m.desc, name+" not created")
	case ino == c && d == nil:
		m.desc = append(m.desc, name+" created")
	case ino == c:
		m.desc = append(m.desc, name+" replaced")
	}
	return ino
}

// content chooses the bytes of a file: its synced content, perhaps
// followed by part of what was written since.
func (m *appendMaterializer) content(name string, ino *inode) []byte {
	base := append([]byte(nil), ino.synced...)
	cur, ok := m.fsys.mu.content[ino]
	if !ok || len(cur) <= len(base) || !bytes.Equal(cur[:len(base)], base) {
		return base // nothing appended since the sync, or rewritten: the synced version
	}
	ext := cur[len(base):]
	var keep int
	switch x := m.rng.IntN(8); {
	case x < 2:
		keep = 0
	case x < 4:
		keep = len(ext)
	default:
		keep = m.rng.IntN(len(ext) + 1)
	}
	b := append(base, ext[:keep]...)
	if keep > 0 {
		m.kept = append(m.kept, name)
	}
	tail, how := m.tear(b, len(base))
	m.desc = append(m.desc, fmt.Sprintf("%s kept %d of %d unsynced bytes after %d, then %s", name, keep, len(ext), len(base), how))
	return tail
}

// tear adds what a torn write can leave after the last byte that reached
// the disk, or zeroes a range of the unsynced bytes b[from:].
func (m *appendMaterializer) tear(b []byte, from int) ([]byte, string) {
	switch m.rng.IntN(5) {
	case 0:
		return b, "clean"
	case 1:
		n := 1 + m.rng.IntN(600)
		return append(b, make([]byte, n)...), fmt.Sprintf("%d zeros", n)
	case 2:
		n := 4096 - len(b)%4096
		return append(b, make([]byte, n)...), fmt.Sprintf("zeros to the page end (%d)", n)
	case 3:
		g := make([]byte, 1+m.rng.IntN(300))
		for i := range g {
			g[i] = byte(m.rng.Uint32())
		}
		return append(b, g...), fmt.Sprintf("%d bytes of garbage", len(g))
	default:
		if len(b)-from < 2 {
			return b, "clean"
		}
		i := from + m.rng.IntN(len(b)-from-1)
		j := i + 1 + m.rng.IntN(len(b)-i-1)
		clear(b[i:j])
		m.holes = true
		return b, fmt.Sprintf("a hole of zeros at [%d, %d) with the bytes after it kept", i, j)
	}
}
