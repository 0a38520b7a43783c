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

// State describes a crash state Materialize built.
type State struct {
	// Holes is set when a file kept bytes written after a hole that was
	// lost (later pages or sectors reached the disk, earlier ones did not,
	// appended or overwritten): a reader that refuses to guess
	// (ErrCorrupt) is right to refuse such a file.
	Holes bool
	// OverZeros is set when every hole is one a writer of zeros ahead of
	// a file's end leaves: a unit overwritten over synced zeros lost
	// (from its first changed byte on, its synced bytes are zeros), no
	// appended byte kept after it, and the file still ends in a whole
	// aligned sector of zeros past the last unit kept. walq's tail,
	// extended with zeros before records overwrite them, tears so; Open
	// must take such a hole for a torn write, never refuse it.
	OverZeros bool
	// Holed names the files (relative to the root) that got a hole.
	Holed []string
	// Lost names the files (relative to the root) whose content differs
	// from what was written before the crash: unsynced bytes lost, torn,
	// zeroed or followed by junk.
	Lost []string
	// Kept names the files that kept some of the bytes written to them
	// since their last fsync.
	Kept []string
	// Desc says what was chosen, for a failure message.
	Desc string
}

// Names policies: how a directory's names survive.
const (
	namesSynced = iota // as the directory's last fsync left them
	namesCached        // as they were at the crash
	namesMixed         // each name that differs, at random
)

// Materialize writes into dst, which must not exist, one state the crash
// can leave, chosen by rng: per directory, its names as its last fsync
// left them, as they were at the crash, or a mix; per file, the content
// of its last fsync, with some of the sectors or pages overwritten since
// holding their new bytes (see the package doc), then perhaps a prefix of
// what was appended since, torn at any byte, followed by nothing, zeros,
// zeros to the page end, garbage, or with a range of the unsynced bytes
// zeroed (a hole). A file never synced has no durable byte. It fails
// before the crash (or Image).
func (fsys *FS) Materialize(dst string, rng *rand.Rand) (State, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if !fsys.mu.crashed {
		return State{}, errors.New("crashfs: Materialize before the crash")
	}
	m := &materializer{fsys: fsys, rng: rng, names: rng.IntN(3), cached: make(map[*inode]map[string]*inode)}
	for rel, d := range fsys.mu.imageDir {
		m.cached[d] = fsys.mu.image[rel]
	}
	if err := m.dir(".", fsys.mu.imageDir["."], dst); err != nil {
		return State{}, err
	}
	return State{Holes: m.holes, OverZeros: m.holes && !m.otherHoles, Holed: m.holed, Lost: m.lost, Kept: m.kept, Desc: fmt.Sprintf("names %s; %s",
		[]string{"as last fsynced", "as cached", "mixed"}[m.names], strings.Join(m.desc, "; "))}, nil
}

// MaterializeSynced writes into dst, which must not exist, the crash
// state that keeps exactly what was made durable and nothing else: each
// directory's names as its last fsync left them, each file's content at
// its last fsync, every byte written since lost. It is the state a
// sampled Materialize reaches only by chance, and the one that undoes
// every write no fsync covered. It fails before the crash (or Image).
func (fsys *FS) MaterializeSynced(dst string) (State, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if !fsys.mu.crashed {
		return State{}, errors.New("crashfs: MaterializeSynced before the crash")
	}
	// No rng and no names at the crash (cached): pick keeps each durable
	// name, content each file's synced bytes.
	m := &materializer{fsys: fsys, synced: true, names: namesSynced}
	if err := m.dir(".", fsys.mu.imageDir["."], dst); err != nil {
		return State{}, err
	}
	return State{Lost: m.lost, Desc: "names as last fsynced; every unsynced byte lost"}, nil
}

// materializer builds one crash state.
type materializer struct {
	fsys   *FS
	rng    *rand.Rand // nil when synced
	synced bool       // keep only what was made durable (MaterializeSynced)
	names  int        // namesSynced, namesCached or namesMixed
	holes  bool       // a file got a hole
	holed  []string   // the files that got a hole
	// cached holds each directory's names at the crash, by directory
	// (mu.image is by path, and a directory renamed since its parent's
	// fsync may be materialized under its old name)
	cached map[*inode]map[string]*inode
	// otherHoles: a file got a hole that is not a lost overwrite of
	// zeros with the file ending in zeros past it (State.OverZeros)
	otherHoles bool
	lost       []string // files whose content is not what was written
	kept       []string // files that kept unsynced bytes
	desc       []string // what was chosen where it mattered
}

// dir writes directory self, named rel in the crash state, at dst: its
// names as its last fsync left them and as they were at the crash, where
// ever it was then (a directory keeps its names when renamed).
func (m *materializer) dir(rel string, self *inode, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	durable, image := m.fsys.mu.dirNames[self], m.cached[self]
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
			err = m.dir(filepath.Join(rel, name), ino, filepath.Join(dst, name))
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
func (m *materializer) pick(name string, d, c *inode) *inode {
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

// content chooses the bytes of a file: its synced content, with some of
// the sectors or pages overwritten since taking their new bytes, perhaps
// followed by part of what was appended since.
func (m *materializer) content(name string, ino *inode) []byte {
	base := append([]byte(nil), ino.synced...)
	cur, ok := m.fsys.mu.content[ino]
	if !ok || m.synced {
		return base
	}
	n := min(len(cur), len(base))
	// missed: an overwritten unit kept its synced bytes; zeros: each such
	// unit was over zeros; keptEnd: the end of the last unit that took its
	// new bytes.
	missed, zeros, keptEnd := false, true, 0
	holesBefore := m.holes
	m.holes = false // this file's, until it returns
	defer func() {
		if m.holes {
			m.holed = append(m.holed, name)
		}
		m.holes = m.holes || holesBefore
	}()
	if !bytes.Equal(cur[:n], base[:n]) {
		missed, zeros, keptEnd = m.overwrite(name, base[:n], cur[:n])
	}
	overZeros := m.holes // this file's hole by a lost unit, over zeros if zeros
	if overZeros && !zeros {
		m.otherHoles = true
	}
	if len(cur) <= len(base) {
		if overZeros && !endsInZeros(base, keptEnd) {
			m.otherHoles = true
		}
		return base // nothing appended; a cut since the sync is not durable
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
		m.keep(name)
		m.holes = m.holes || missed
		m.otherHoles = m.otherHoles || missed
	}
	tail, how := m.tear(b, len(base))
	if overZeros && !endsInZeros(tail, keptEnd) {
		m.otherHoles = true
	}
	m.desc = append(m.desc, fmt.Sprintf("%s kept %d of %d unsynced bytes after %d, then %s", name, keep, len(ext), len(base), how))
	return tail
}

// tear adds what a torn write can leave after the last byte that reached
// the disk, or zeroes a range of the unsynced bytes b[from:].
func (m *materializer) tear(b []byte, from int) ([]byte, string) {
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
		m.holes, m.otherHoles = true, true
		return b, fmt.Sprintf("a hole of zeros at [%d, %d) with the bytes after it kept", i, j)
	}
}

// Sizes an overwrite tears at: a disk writes a 512-byte sector whole or not
// at all, and the page cache writes a 4 KiB page back as a unit.
const (
	sectorSize = 512
	pageSize   = 4096
)

// overwrite gives b, a file's synced bytes, some of the new bytes written
// over them since (now, as long as b): the file is cut into sectors or
// pages, and each one that changed keeps its synced bytes or takes its new
// ones, none, all, or each at random, in any order. A unit that took its
// new bytes after one that did not makes a hole. It reports whether a
// changed unit kept its synced bytes (appended bytes kept after it make a
// hole as well), whether every such unit's synced bytes were zeros from
// its first changed byte on, and the end of the last unit that took its
// new bytes.
func (m *materializer) overwrite(name string, b, now []byte) (missed, zeros bool, keptEnd int) {
	unit := sectorSize
	if m.rng.IntN(2) == 0 {
		unit = pageSize
	}
	mode := m.rng.IntN(4) // 0: none kept, 1: all kept, else each at random
	changed, kept := 0, 0
	zeros = true
	for off := 0; off < len(b); off += unit {
		end := min(off+unit, len(b))
		if bytes.Equal(b[off:end], now[off:end]) {
			continue
		}
		changed++
		if mode == 0 || mode > 1 && m.rng.IntN(2) == 0 {
			missed = true // a changed unit before the next ones kept its synced bytes
			zeros = zeros && zeroFrom(b[off:end], now[off:end])
			continue
		}
		copy(b[off:end], now[off:end])
		kept++
		keptEnd = end
		m.holes = m.holes || missed
	}
	if kept > 0 {
		m.keep(name)
	}
	m.desc = append(m.desc, fmt.Sprintf("%s kept %d of %d overwritten %d-byte units", name, kept, changed, unit))
	return missed, zeros, keptEnd
}

// zeroFrom reports whether old, a unit's synced bytes, is zeros from the
// first byte where now differs from it on.
func zeroFrom(old, now []byte) bool {
	i := 0
	for i < len(old) && old[i] == now[i] {
		i++
	}
	for _, c := range old[i:] {
		if c != 0 {
			return false
		}
	}
	return true
}

// endsInZeros reports whether b ends in a whole aligned sector of zeros
// (and zeros after it) that starts at or after from.
func endsInZeros(b []byte, from int) bool {
	s := len(b) - len(b)%sectorSize - sectorSize
	if s < from || s < 0 {
		return false
	}
	for _, c := range b[s:] {
		if c != 0 {
			return false
		}
	}
	return true
}

// keep records that name kept some of its unsynced bytes.
func (m *materializer) keep(name string) {
	if n := len(m.kept); n == 0 || m.kept[n-1] != name {
		m.kept = append(m.kept, name)
	}
}
