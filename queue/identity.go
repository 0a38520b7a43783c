package queue

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/walq/walq/recovery"
	"github.com/walq/walq/wal"
)

// The identity file says what a queue directory holds. It is written
// when the directory is created (or adopted, below), and rewritten only to
// raise its format (below):
//
//	| Magic "WALQDIR\x00" (8B) | Format (2B LE) | Kind (1B) | Key length (1B) |
//	| Sort key type (Key length B, ASCII) | CRC-32C (4B LE) |
//
// The CRC-32C (Castagnoli) covers every byte before it. Format is the
// directory's format version, FormatVersion. Kind is 1 for an ack queue, 2
// for a sorted queue, 3 for a windowed one. The sort key type is the Go
// kind of a sorted queue's K ("int64", "float64", "string", ...; "time" for
// time.Time; a named type is its underlying kind) and empty for an ack
// queue. These constants are part of the on-disk format and must not
// change; a golden-bytes test pins them (testdata/identity-*.golden).
//
// Format 2 differs from format 1 only in the log: its entries carry the
// log's durable LSN at their write (wal entry version 2), which the
// repair of a torn tail relies on. An older release reading such an
// entry at the log's end would take it for a torn write and cut it, so a
// directory whose log may hold one says format 2, which the opens of
// older releases refuse ("directory format 2, this release reads 1");
// their Verify and Repair do not read the identity file (README, "There
// is no way back"). This release reads formats 1 and 2; a writable Open
// of a format-1 directory rewrites its identity file as format 2
// (durably: checkIdentity, before the log is opened, so before any entry
// of version 2 is written), and so does Repair before its salvage
// (raiseFormat). A read-only open changes nothing.
//
// A directory written before identity files existed has none. Open adopts
// it: the kind is inferred from the lifetime totals of its snapshot and
// log (enqueues make an ack queue, publishes a sorted one), and a
// directory that shows the other kind is refused. A sorted directory
// cannot tell from its log whether it was windowed, nor its sort key type
// (all integer and time keys are 8 bytes), so it is written as the kind
// and key type it is opened as; so is a directory whose files do not
// replay (damage, which the open then reports or salvages): its log is
// about to receive entries of version 2. A read-only open writes nothing,
// so it adopts nothing: it checks what it can infer.
const (
	identityName  = "IDENTITY"
	identityMagic = "WALQDIR\x00"
	// FormatVersion is the version of the directory's format that this
	// release writes: the identity file, the log entries (version 2; it
	// reads version 1 as well) and the snapshots (version 1). It reads
	// formats minFormatVersion to FormatVersion.
	FormatVersion = 2
	// minFormatVersion is the oldest format this release reads: format 1,
	// whose log entries are of version 1.
	minFormatVersion = 1
)

// Kind is what a queue directory holds.
type Kind uint8

// The kinds of queue directory. Their values are part of the on-disk
// format.
const (
	KindAck      Kind = 1 // Open
	KindSorted   Kind = 2 // OpenSorted
	KindWindowed Kind = 3 // OpenWindowed
)

// String names the kind: "ack", "sorted" or "windowed".
func (k Kind) String() string {
	switch k {
	case KindAck:
		return "ack"
	case KindSorted:
		return "sorted"
	case KindWindowed:
		return "windowed"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Identity is what a queue directory says it holds.
type Identity struct {
	Format  int    // the directory's format version (FormatVersion)
	Kind    Kind   // ack, sorted or windowed
	SortKey string // a sorted queue's sort key type ("int64", "time", ...); "" for an ack queue
}

// String describes the identity for people: "an ack queue", "a sorted
// queue of int64 sort keys".
func (id Identity) String() string {
	switch {
	case id.Kind == KindAck:
		return "an ack queue"
	case id.SortKey == "":
		return "a " + id.Kind.String() + " queue"
	}
	return fmt.Sprintf("a %s queue of %s sort keys", id.Kind, id.SortKey)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeIdentity returns the identity file's bytes.
func encodeIdentity(id Identity) []byte {
	b := append([]byte(identityMagic), 0, 0, byte(id.Kind), byte(len(id.SortKey)))
	binary.LittleEndian.PutUint16(b[len(identityMagic):], uint16(id.Format))
	b = append(b, id.SortKey...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeIdentity is the inverse of encodeIdentity.
func decodeIdentity(b []byte) (Identity, error) {
	const fixed = len(identityMagic) + 4
	if len(b) < fixed+4 || !bytes.HasPrefix(b, []byte(identityMagic)) {
		return Identity{}, fmt.Errorf("%w: not an identity file (%d bytes)", ErrCorrupt, len(b))
	}
	n := fixed + int(b[fixed-1])
	if len(b) != n+4 {
		return Identity{}, fmt.Errorf("%w: identity file of %d bytes, want %d", ErrCorrupt, len(b), n+4)
	}
	if crc32.Checksum(b[:n], castagnoli) != binary.LittleEndian.Uint32(b[n:]) {
		return Identity{}, fmt.Errorf("%w: identity file checksum mismatch", ErrCorrupt)
	}
	id := Identity{Format: int(binary.LittleEndian.Uint16(b[len(identityMagic):])),
		Kind: Kind(b[fixed-2]), SortKey: string(b[fixed:n])}
	if id.Format < minFormatVersion || id.Format > FormatVersion {
		return id, fmt.Errorf("%w: directory format %d, this release reads %d to %d", ErrWrongKind, id.Format,
			minFormatVersion, FormatVersion)
	}
	return id, nil
}

// ReadIdentity returns what the queue directory dir says it holds. It
// returns an error wrapping fs.ErrNotExist when dir has no identity file
// (a directory created before they existed, until a queue opens it).
func ReadIdentity(dir string) (Identity, error) { return readIdentity(nil, dir) }

// readIdentity is ReadIdentity through fsys (nil: the real file system).
func readIdentity(fsys wal.FS, dir string) (Identity, error) {
	path := filepath.Join(dir, identityName)
	b, err := wal.ReadFile(fsys, path)
	if err != nil {
		return Identity{}, fmt.Errorf("queue: read identity: %w", err)
	}
	id, err := decodeIdentity(b)
	if err != nil {
		return id, fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}

// writeIdentity writes dir's identity file durably: a temporary file,
// fsynced, renamed into place, and the directory fsynced.
func writeIdentity(fsys wal.FS, dir string, id Identity, mode fs.FileMode) error {
	path := filepath.Join(dir, identityName)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("queue: write identity: %w", err)
	}
	_, err = f.Write(encodeIdentity(id))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = wal.SyncDirFS(fsys, dir)
	}
	if err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("queue: write identity %s: %w", path, err)
	}
	return nil
}

// sortKeyType names K's kind for the identity file.
func sortKeyType[K SortKey]() string {
	var k K
	if _, ok := any(k).(time.Time); ok {
		return "time"
	}
	return reflect.TypeOf(k).Kind().String()
}

// mismatch is the error for a directory opened as what it is not.
func mismatch(dir string, have, want Identity, how string) error {
	return fmt.Errorf("%w: %s holds %s%s, opened as %s", ErrWrongKind, dir, have, how, want)
}

// matches reports whether a directory of identity have may be opened as
// want; a zero want (a read-only Open) takes any kind.
func (have Identity) matches(want Identity) bool {
	return want.Kind == 0 || (have.Kind == want.Kind && have.SortKey == want.SortKey)
}

// checkIdentity checks dir's identity against want before a writable
// open, writing it first if dir is new, adopting a directory written
// before identity files existed, or raising an older format to
// FormatVersion (the log this open writes is of the new format). The
// caller holds the exclusive lock.
func checkIdentity(dir string, o Options) (Identity, error) {
	want := o.ident
	if want.Kind == 0 {
		want = Identity{Kind: KindAck}
	}
	want.Format = FormatVersion
	have, err := readIdentity(o.FS, dir)
	switch {
	case err == nil && !have.matches(want):
		return have, mismatch(dir, have, want, "")
	case err == nil && have.Format < FormatVersion:
		have.Format = FormatVersion
		return have, writeIdentity(o.fs(), dir, have, o.FileMode)
	case err == nil:
		return have, nil
	case !errors.Is(err, fs.ErrNotExist):
		return have, err
	}
	if err := adoptable(dir, o, want); err != nil {
		return want, err
	}
	return want, writeIdentity(o.fs(), dir, want, o.FileMode)
}

// adoptable returns an error if dir, which has no identity file, holds
// data that shows it is not of want's kind. A new directory is adoptable.
// So is one whose files do not replay read-only (damage that the open
// itself reports, or salvages), which shows no kind: it takes want's,
// which every entry this open writes is of. It must not stay without an
// identity file: the open writes entries of version 2, which an older
// release, adopting the directory, would cut as a torn tail.
func adoptable(dir string, o Options, want Identity) error {
	if isNew, err := newDir(o.fs(), dir); isNew || err != nil {
		return err
	}
	probe, err := replayReadOnly(dir, o, Identity{}, false)
	if err != nil {
		return nil // damage, which the open itself reports or salvages
	}
	kind, known := inferKind(probe.mu.st)
	if err := probe.closeReadOnly(); err != nil {
		return err
	}
	if known && !sameFamily(kind, want.Kind) {
		return mismatch(dir, Identity{Kind: kind}, want, " (inferred from its log)")
	}
	return nil
}

// newDir reports whether dir holds no queue yet, as listed through fsys:
// no snapshot, no log segment.
func newDir(fsys wal.FS, dir string) (bool, error) {
	snaps, err := recovery.ListFS(fsys, dir)
	if err != nil || len(snaps) > 0 {
		return false, err
	}
	des, err := fsys.ReadDir(filepath.Join(dir, logDir))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	for _, de := range des {
		if de.Name() != "LOCK" {
			return false, err
		}
	}
	return true, err
}

// inferKind tells an ack queue from a sorted one by what was ever written
// to it; known is false when nothing was.
func inferKind(st *state) (k Kind, known bool) {
	switch {
	case st.counts.Published > 0:
		return KindSorted, true
	case st.counts.Enqueued > 0:
		return KindAck, true
	}
	return 0, false
}

// sameFamily reports whether kinds a and b store the same records: ack
// alone, or sorted and windowed.
func sameFamily(a, b Kind) bool { return (a == KindAck) == (b == KindAck) }

// checkIdentityReadOnly reads dir's identity for a read-only open and
// checks it against want; a directory without one returns a zero
// Identity, to be inferred after the replay (inferReadOnly).
func (q *Queue) checkIdentityReadOnly(want Identity) (Identity, error) {
	have, err := readIdentity(q.opts.FS, q.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Identity{}, nil
	case err != nil:
		return have, err
	case !have.matches(want):
		return have, mismatch(q.dir, have, want, "")
	}
	return have, nil
}

// inferReadOnly fills in the identity of a directory that has no identity
// file from its replayed state, and checks it against want.
func (q *Queue) inferReadOnly(want Identity) error {
	if q.ident.Kind != 0 {
		return nil
	}
	kind, known := inferKind(q.mu.st)
	if known && want.Kind != 0 && !sameFamily(kind, want.Kind) {
		return mismatch(q.dir, Identity{Kind: kind}, want, " (inferred from its log)")
	}
	q.ident = want
	if want.Kind == 0 {
		q.ident = Identity{Kind: kind}
	}
	q.ident.Format = FormatVersion
	return nil
}

// decodeSortAny decodes an encoded sort key by the directory's sort key
// type: every integer kind as int64 or uint64, floats as float64; the raw
// bytes when the type is not recorded.
func (id Identity) decodeSortAny(b []byte) any {
	var v any
	var err error
	switch id.SortKey {
	case "int", "int8", "int16", "int32", "int64":
		v, err = decodeSort[int64](b)
	case "uint", "uint8", "uint16", "uint32", "uint64":
		v, err = decodeSort[uint64](b)
	case "float32", "float64":
		v, err = decodeSort[float64](b)
	case "string":
		v, err = decodeSort[string](b)
	case "time":
		v, err = decodeSort[time.Time](b)
	default:
		return b
	}
	if err != nil {
		return b
	}
	return v
}

// Identity returns what the queue's directory says it holds (for a
// directory written before identity files, what Open inferred or adopted;
// Kind is zero if a read-only open found nothing to infer from).
func (q *Queue) Identity() Identity { return q.ident }
