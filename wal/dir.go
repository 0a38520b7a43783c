package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The file names are tidwall/wal's (tidwall.go).

// segName is a segment file found in the log directory.
type segName struct {
	index uint64 // tidwall/wal index of its first entry, from the name
	path  string // file path
}

// dirListing is what a log directory holds.
type dirListing struct {
	segs   []segName // NAME files, ascending
	start  *segName  // NAME.START left by an interrupted tidwall/wal TruncateFront
	front  uint64    // the highest NAME.FRONT: segments before NAME are being removed; 0 when none
	fronts []string  // every NAME.FRONT file
	ends   []string  // NAME.END files (tidwall/wal TruncateBack, never used here)
	temps  []string  // *.TEMP files left by an interrupted atomic write
}

// listDir reads a log directory; other files are ignored, as tidwall/wal does.
func listDir(fsys FS, dir string) (dirListing, error) {
	var d dirListing
	des, err := fsys.ReadDir(dir)
	if err != nil {
		return d, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	for _, de := range des {
		name := de.Name()
		index, ok := parseIndex(name)
		if de.IsDir() || !ok {
			continue
		}
		sn := segName{index: index, path: filepath.Join(dir, name)}
		switch rest := name[nameDigits:]; {
		case rest == "":
			d.segs = append(d.segs, sn)
		case rest == startSuffix && d.start == nil:
			d.start = &sn
		case rest == frontSuffix:
			d.front, d.fronts = max(d.front, index), append(d.fronts, sn.path)
		case rest == endSuffix:
			d.ends = append(d.ends, sn.path)
		case strings.HasSuffix(rest, tempSuffix):
			d.temps = append(d.temps, sn.path)
		}
	}
	sort.Slice(d.segs, func(i, j int) bool { return d.segs[i].index < d.segs[j].index })
	return d, nil
}

// FrontMarker reports an interrupted truncation in the log directory dir:
// the file name of the highest NAME.FRONT marker, "" when there is none,
// and whether a segment lies before it, one that a writable Open, which
// finishes the truncation (removeFront), would remove. It changes
// nothing. fsys nil means the real file system. Other files are ignored,
// as Open ignores them.
func FrontMarker(fsys FS, dir string) (name string, removes bool, err error) {
	d, err := listDir(orOS(fsys), dir)
	if err != nil || d.front == 0 {
		return "", false, err
	}
	return filepath.Base(frontPath(d, d.front)), len(d.segs) > 0 && d.segs[0].index < d.front, nil
}

// parseIndex parses the 20-digit index a segment file name starts with.
func parseIndex(name string) (uint64, bool) {
	if len(name) < nameDigits {
		return 0, false
	}
	index, err := strconv.ParseUint(name[:nameDigits], 10, 64)
	return index, err == nil && index > 0
}

// effective returns the segments as they will be once an interrupted
// truncation is finished: a START file stands for every segment up to its
// index (those were about to be removed). A read-only Log reads it in place.
func (d dirListing) effective() []segName {
	segs := d.segs
	for len(segs) > 0 && segs[0].index < d.front {
		segs = segs[1:] // being removed
	}
	if d.start == nil {
		return segs
	}
	out := []segName{*d.start}
	for _, s := range segs {
		if s.index > d.start.index {
			out = append(out, s)
		}
	}
	return out
}

// prepareDir leaves a writable log directory in the state tidwall/wal's
// Open expects and the repair can work on: leftover temp files removed, an
// interrupted truncation finished (what tidwall/wal's load would do, plus
// the directory fsync it lacks). It returns the segments.
func prepareDir(fsys FS, dir string, d dirListing) ([]segName, error) {
	changed := len(d.temps) > 0
	for _, p := range d.temps {
		if err := fsys.Remove(p); err != nil {
			return nil, fmt.Errorf("wal: remove temp file: %w", err)
		}
	}
	if d.start != nil {
		if err := finishStart(fsys, d); err != nil {
			return nil, err
		}
		changed = true
	}
	if d.front != 0 {
		if err := removeFront(fsys, dir, d.front); err != nil {
			return nil, err
		}
		changed = true
	}
	if !changed {
		return d.segs, nil
	}
	if err := SyncDirFS(fsys, dir); err != nil {
		return nil, err
	}
	d, err := listDir(fsys, dir)
	return d.segs, err
}

// foreign refuses a directory that holds a file walq never writes and
// whose meaning to tidwall/wal would destroy records (ErrForeign): a
// NAME.END file, or a NAME.START file that holds no valid entry or does not
// start with the log's entry at its index (start.go). walq
// changes nothing then, Salvage and ReadOnly included, and names it.
func foreign(fsys FS, d dirListing) error {
	if len(d.ends) > 0 {
		// tidwall/wal's TruncateBack marker: its load would finish that
		// truncation, removing every segment after NAME and replacing
		// NAME with the marker's bytes.
		return fmt.Errorf("%w: %w: unexpected tidwall/wal END file %s: a truncation marker walq never writes; "+
			"finishing the truncation it marks would remove the segments after it, acknowledged records among them, "+
			"so no open, salvage or repair changes it: if another program wrote it, move it out of the log directory, then open again",
			ErrCorrupt, ErrForeign, d.ends[0])
	}
	if err := foreignFront(d); err != nil {
		return err
	}
	if d.start == nil {
		return nil
	}
	// An older walq's TruncateFront wrote the kept segment's entries, from
	// NAME on, to NAME.START (synced before its rename), then removed the
	// segments up to NAME: a START file without a valid first entry is no
	// such copy, and finishing it would put nothing in their place.
	ok, err := startsWithEntry(fsys, d.start.path)
	if ok {
		if ok, err = startFits(fsys, d); err == nil && !ok {
			return fmt.Errorf("%w: %w: %s starts with a valid entry, but not with this log's entry at its index (a "+
				"truncation's copy starts with that entry: this is another log's file, or another part of this one); "+
				"finishing it would remove the segments up to it, acknowledged records among them, and put other records "+
				"in their place, so no open, salvage or repair changes it: move it out of the log directory, then open again",
				ErrCorrupt, ErrForeign, d.start.path)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		// A writer's Open finished it since the listing (a read-only Open
		// beside it): opening the segments finds it gone, and lists again.
		return nil
	}
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("%w: %w: %s holds no valid entry, so it is not a truncation walq began (that file holds the kept "+
		"segment's entries); finishing it would remove the segments up to it, acknowledged records among them, "+
		"so no open, salvage or repair changes it: move it out of the log directory, then open again",
		ErrCorrupt, ErrForeign, d.start.path)
}

// foreignFront refuses a NAME.FRONT file that names no segment. walq
// writes one for the first segment a truncation keeps (removeFront), which
// stays until the marker is removed, so the highest marker always names a
// segment that exists; one that does not (past the tail, or inside a
// segment's entries, where no segment starts) was copied in from elsewhere,
// and finishing it would remove every segment before NAME: all of them for
// one past the tail.
func foreignFront(d dirListing) error {
	if d.front == 0 || (d.start != nil && d.start.index == d.front) {
		return nil
	}
	for _, s := range d.segs {
		if s.index == d.front {
			return nil
		}
	}
	return fmt.Errorf("%w: %w: %w: %s names no segment of the log, so it is not a truncation walq began (walq's marks the first "+
		"segment it keeps, which is there as long as the marker is); finishing it would remove every segment before it, "+
		"acknowledged records among them, so no open, salvage or repair changes it: move it out of the log directory, then open again",
		ErrCorrupt, ErrForeign, errFrontUnlisted, frontPath(d, d.front))
}

// errFrontUnlisted is foreignFront's refusal: a NAME.FRONT file whose
// segment the listing does not hold.
var errFrontUnlisted = errors.New("truncation marker without its segment")

// frontPath returns the path of the NAME.FRONT file for index.
func frontPath(d dirListing, index uint64) string {
	for _, p := range d.fronts {
		if i, ok := parseIndex(filepath.Base(p)); ok && i == index {
			return p
		}
	}
	return segmentName(index) + frontSuffix
}

// startsWithEntry reports whether the file at path starts with a valid
// entry, CRC checked.
func startsWithEntry(fsys FS, path string) (bool, error) {
	sf, err := openSegFile(fsys, path)
	if err != nil {
		return false, err
	}
	var ok bool
	fi, err := sf.f.Stat()
	if err == nil {
		_, _, _, err = (&segReader{f: sf.f}).entry(0, fi.Size())
		ok = err == nil
		if isFormatError(err) {
			err = nil
		}
	}
	if cerr := sf.release(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("wal: read %s: %w", path, err)
	}
	return ok, nil
}

// finishStart removes the segments a START file replaces, then renames it.
func finishStart(fsys FS, d dirListing) error {
	for _, s := range d.segs {
		if s.index > d.start.index {
			break
		}
		if err := fsys.Remove(s.path); err != nil {
			return fmt.Errorf("wal: finish interrupted truncation: %w", err)
		}
	}
	final := d.start.path[:len(d.start.path)-len(startSuffix)]
	if err := fsys.Rename(d.start.path, final); err != nil {
		return fmt.Errorf("wal: finish interrupted truncation: %w", err)
	}
	return nil
}

// SyncDir fsyncs a directory so that creates, renames and removes in it
// survive a power loss, through the real file system (SyncDirFS takes an
// FS).
func SyncDir(dir string) error { return SyncDirFS(nil, dir) }

// removeFront removes, durably, every segment before the one that starts
// at index: it creates NAME.FRONT for that segment and fsyncs the
// directory, removes the older segments and fsyncs it again, then removes
// every NAME.FRONT. A crash at any point leaves either the whole front
// (no FRONT file yet) or a FRONT file, which Open obeys (prepareDir): a
// power loss can never leave a hole of removed segments between kept ones.
func removeFront(fsys FS, dir string, index uint64) error {
	d, err := listDir(fsys, dir)
	if err != nil {
		return err
	}
	if d.front < index {
		p := filepath.Join(dir, segmentName(index)+frontSuffix)
		if err := createEmpty(fsys, p, false, 0o600); err != nil {
			return fmt.Errorf("%w (truncate front)", err)
		}
		d.fronts = append(d.fronts, p)
	}
	for _, s := range d.segs {
		if s.index >= index {
			break
		}
		if err := fsys.Remove(s.path); err != nil {
			return fmt.Errorf("wal: truncate front: %w", err)
		}
	}
	if err := SyncDirFS(fsys, dir); err != nil {
		return err
	}
	for _, p := range d.fronts {
		if err := fsys.Remove(p); err != nil {
			return fmt.Errorf("wal: truncate front: %w", err)
		}
	}
	return SyncDirFS(fsys, dir)
}

// createEmpty creates the file path, empty, and fsyncs its directory, so
// that the name is durable before anything is written to the file or
// depends on it. excl refuses a file already there.
func createEmpty(fsys FS, path string, excl bool, mode os.FileMode) error {
	flag := os.O_CREATE | os.O_WRONLY
	if excl {
		flag |= os.O_EXCL
	}
	f, err := fsys.OpenFile(path, flag, mode)
	if err != nil {
		return fmt.Errorf("wal: create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wal: close new file %s: %w", path, err)
	}
	return SyncDirFS(fsys, filepath.Dir(path))
}
