package recovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/walq/walq/wal"
)

// These constants are part of the snapshot file format.
const (
	magic      = "WALQSNAP"
	version    = 1
	headerSize = 8 + 1 + 4 + 8 + 8
	prefix     = "snapshot-"
	suffix     = ".snap"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Info describes one snapshot file.
type Info struct {
	Path  string // file path
	LSN   uint64 // last log record the snapshot reflects
	Bytes int64  // file size
}

// Name returns the file name of the snapshot at lsn.
func Name(lsn uint64) string { return fmt.Sprintf("%s%020d%s", prefix, lsn, suffix) }

// Encode returns the file bytes of a snapshot.
func Encode(lsn uint64, body []byte) []byte {
	b := make([]byte, headerSize+len(body))
	putHeader(b, lsn, len(body))
	copy(b[headerSize:], body)
	setChecksum(b, crc32.Checksum(b[13:], castagnoli))
	return b
}

// putHeader writes the header of a snapshot of n body bytes at lsn into
// h[:headerSize], all but the checksum, which covers h[13:] and the body.
func putHeader(h []byte, lsn uint64, n int) {
	copy(h, magic)
	h[8] = version
	binary.LittleEndian.PutUint64(h[13:], lsn)
	binary.LittleEndian.PutUint64(h[21:], uint64(n))
}

// setChecksum stores the header's checksum.
func setChecksum(h []byte, sum uint32) { binary.LittleEndian.PutUint32(h[9:], sum) }

// Decode checks the file bytes of a snapshot and returns its LSN and body.
func Decode(b []byte) (uint64, []byte, error) {
	if len(b) < headerSize || string(b[:8]) != magic {
		return 0, nil, fmt.Errorf("%w: bad header at offset 0", ErrCorrupt)
	}
	if b[8] != version {
		return 0, nil, fmt.Errorf("%w: version %d at offset 8", ErrCorrupt, b[8])
	}
	n := binary.LittleEndian.Uint64(b[21:])
	if n != uint64(len(b)-headerSize) {
		return 0, nil, fmt.Errorf("%w: body length %d, file has %d bytes after the header", ErrCorrupt, n, len(b)-headerSize)
	}
	if crc32.Checksum(b[13:], castagnoli) != binary.LittleEndian.Uint32(b[9:]) {
		return 0, nil, fmt.Errorf("%w: checksum mismatch over bytes 13..%d", ErrCorrupt, len(b))
	}
	return binary.LittleEndian.Uint64(b[13:]), b[headerSize:], nil
}

// List returns the snapshots in dir, oldest first.
//
// A writer may replace a snapshot while List reads the directory: it
// renames the new one into place, then removes the old. A snapshot
// removed between the read of the directory and its stat is not listed,
// and the directory is read again, so that the one that replaced it is
// found; List reads it again for as long as each read finds another set
// of snapshots than the one before. Every snapshot that exists
// throughout the call is listed, and so is one that replaced, during the
// call, a snapshot the call found gone.
func List(dir string) ([]Info, error) { return ListFS(nil, dir) }

// ListFS is List through fsys (nil: the real file system).
func ListFS(fsys wal.FS, dir string) ([]Info, error) {
	if fsys == nil {
		fsys = wal.OSFS{}
	}
	var before []Info
	for {
		out, listed, vanished, err := listOnce(fsys, dir)
		if err != nil || !vanished || sameSnapshots(listed, before) {
			return out, err
		}
		before = listed
	}
}

// listOnce reads dir once. It returns the snapshots it could stat, oldest
// first, every snapshot the directory listed (stat or not), and whether
// one of them was removed before its stat.
func listOnce(fsys wal.FS, dir string) (out, listed []Info, vanished bool, err error) {
	des, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, false, fmt.Errorf("recovery: list %s: %w", dir, err)
	}
	for _, de := range des {
		lsn, ok := parseName(de.Name())
		if !ok || de.IsDir() {
			continue
		}
		info := Info{Path: filepath.Join(dir, de.Name()), LSN: lsn}
		listed = append(listed, info)
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			vanished = true // removed by a writer that replaced it
			continue
		}
		if err != nil {
			return nil, nil, false, fmt.Errorf("recovery: stat %s: %w", de.Name(), err)
		}
		info.Bytes = fi.Size()
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LSN < out[j].LSN })
	return out, listed, vanished, nil
}

// sameSnapshots reports whether a and b, two reads of a directory, list
// the same snapshots in the same order.
func sameSnapshots(a, b []Info) bool {
	return slices.EqualFunc(a, b, func(x, y Info) bool { return x.LSN == y.LSN })
}

func parseName(name string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	lsn, err := strconv.ParseUint(name[len(prefix):len(name)-len(suffix)], 10, 64)
	return lsn, err == nil && len(name) == len(Name(lsn))
}

// Latest loads the newest snapshot in dir. It returns ErrNoSnapshot when
// there is none, and ErrCorrupt, naming the file, when the newest fails its
// checks. A newest snapshot that a writer replaces after Latest listed it
// and before it read it is not an error: Latest lists the directory again
// (see List) and loads the one that replaced it, for as long as each
// newest it finds gone was replaced by a newer one.
func Latest(dir string) (Info, []byte, error) { return LatestFS(nil, dir) }

// LatestFS is Latest through fsys (nil: the real file system).
func LatestFS(fsys wal.FS, dir string) (Info, []byte, error) {
	var gone *Info // the newest snapshot, found removed before its read
	for {
		infos, err := ListFS(fsys, dir)
		if err != nil {
			return Info{}, nil, err
		}
		if len(infos) == 0 {
			return Info{}, nil, ErrNoSnapshot
		}
		info := infos[len(infos)-1]
		body, err := readInfo(fsys, info)
		if !errors.Is(err, fs.ErrNotExist) || (gone != nil && info.LSN <= gone.LSN) {
			return info, body, err
		}
		gone = &info
	}
}

// readInfo reads the snapshot info and returns its body: ErrCorrupt,
// naming the file, when it fails its checks or holds another LSN.
func readInfo(fsys wal.FS, info Info) ([]byte, error) {
	b, err := wal.ReadFile(fsys, info.Path)
	if err != nil {
		return nil, fmt.Errorf("recovery: read %s: %w", info.Path, err)
	}
	lsn, body, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", info.Path, err)
	}
	if lsn != info.LSN {
		return nil, fmt.Errorf("%w: %s holds LSN %d", ErrCorrupt, info.Path, lsn)
	}
	return body, nil
}
