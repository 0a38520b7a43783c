package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/walq/walq/queue"
)

// urlNotOpened says of a target that looks like a URL that no engine of
// this build opens it; true of walq, which links none, and of a build
// whose engine owns other URLs.
const urlNotOpened = "nor a queue URL that this build opens (walq-redis opens redis:// and rediss:// queues)"

// checkQueueDir returns an error unless dir holds a queue, so that a typo
// does not make a command create an empty queue. It names dir as Redacted
// shows it: a queue URL given to a walq that links no engine for it is
// taken for a directory, and its password must not be shown; where no
// such directory exists, the error says which build opens it.
func checkQueueDir(dir string) error {
	shown := Redacted(dir)
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a walq queue directory", shown)
	}
	fi, err := os.Stat(filepath.Join(dir, "log"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, derr := os.Stat(dir); derr != nil {
			if looksLikeURL(dir) {
				return fmt.Errorf("%s: no such directory, %s", shown, urlNotOpened)
			}
			return fmt.Errorf("%s: no such directory", shown)
		}
		return fmt.Errorf("%s is not a walq queue directory (it has no log/)", shown)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a walq queue directory (log is not a directory)", shown)
	}
	return nil
}

// openQueue opens the existing queue in dir as its owner.
func openQueue(e *env, dir string, o *queue.Options) (*queue.Queue, error) {
	if err := checkQueueDir(dir); err != nil {
		return nil, err
	}
	return openDir(e, dir, o)
}

// openAny is openQueue that creates the queue if dir does not exist or is
// an empty directory; it refuses a directory that holds other files, and
// a file. It never creates a directory named like a URL: a queue URL that
// no engine of this walq owns (redis://… given to walq, not walq-redis)
// would otherwise become a local queue under a path spelt from the URL,
// password included, and the command would report success.
func openAny(e *env, dir string, o *queue.Options) (*queue.Queue, error) {
	if err := checkQueueDir(dir); err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) && looksLikeURL(dir) {
			return nil, usagef("%s is no queue directory, %s: this command would create a directory of that name", Redacted(dir), urlNotOpened)
		}
		des, rerr := os.ReadDir(dir)
		if (rerr == nil && len(des) > 0) || (rerr != nil && !errors.Is(rerr, fs.ErrNotExist)) {
			return nil, err
		}
	}
	return openDir(e, dir, o)
}

// openDir opens the queue in dir with o (nil: the defaults) as
// ownerOptions makes it, and prints on stderr what the open repaired, if
// anything.
func openDir(e *env, dir string, o *queue.Options) (*queue.Queue, error) {
	return openDirWith(e, dir, ownerOptions(o))
}

// openDirWith is openDir with the options o as they are.
func openDirWith(e *env, dir string, o *queue.Options) (*queue.Queue, error) {
	sp := e.spinner("opening " + dir)
	q, err := queue.Open(dir, o)
	sp.done()
	if err != nil {
		return nil, err
	}
	noteRecovery(e.stderr, q.Recovery())
	return q, nil
}

// ownerOptions returns a copy of o (nil: the defaults) for an open that
// may change the queue. The application's DedupWindow and MaxDeliveries
// are recorded nowhere, and a command must not apply its own in their
// place: it would forget acked ids that the application's window still
// holds (replaying their acks, or at an enqueue), so that a retried
// enqueue would be taken twice, and dead-letter messages that the
// application's limit still lets through (at the open after a crash, at
// a lease's end, at a nack). So it keeps every acked id (an unlimited
// window) and dead-letters nothing. The application's next open applies
// its own again: its first enqueue forgets the ids its window has passed,
// and a message or sorted value past its limit goes to the dead set when
// a delivery or pull would take it.
func ownerOptions(o *queue.Options) *queue.Options {
	c := queue.Options{}
	if o != nil {
		c = *o
	}
	c.DedupWindow = math.MaxInt64
	c.MaxDeliveries = -1
	return &c
}

// inspectOptions are the options of a read-only open. Like ownerOptions
// it keeps every acked id the files remember (an unlimited dedup window),
// so that the figures after a crash are those the application's open
// reports when it has a window: a replay with none would forget the ids
// acked since the snapshot.
func inspectOptions() *queue.Options {
	return &queue.Options{ReadOnly: true, DedupWindow: math.MaxInt64}
}

// inspectQueue opens the queue in dir read-only: nothing is written, and
// a queue that another process has open is read as its files stand.
func inspectQueue(e *env, dir string) (*queue.Queue, error) {
	if err := checkQueueDir(dir); err != nil {
		return nil, err
	}
	q, err := queue.Open(dir, inspectOptions())
	if err != nil {
		return nil, err
	}
	noteInspect(e.stderr, dir, q.InUse(), q.Recovery())
	return q, nil
}

// noteInspect prints what a read-only open found and left as it was.
func noteInspect(w io.Writer, dir string, inUse bool, r queue.Recovery) {
	if inUse {
		fmt.Fprintf(w, "walq: note: another process has %s open; these figures are as of its last write to the files\n", dir)
	}
	if t := r.Log.Torn; t != nil && !inUse {
		fmt.Fprintf(w, "walq: note: the log ends in a torn tail, left as it is (the next open cuts it): %s\n", describeDamage(*t))
	}
	if !r.Clean && !inUse && r.SnapshotLSN+uint64(r.Replayed) > 0 {
		fmt.Fprintln(w, "walq: note: the queue was not closed cleanly; its leases end when it is next opened")
	}
}

// closeQueue closes q, keeping the first error.
func closeQueue(q *queue.Queue, err *error) {
	if cerr := q.Close(); *err == nil && cerr != nil {
		*err = cerr
	}
}

// noteRecovery prints what Open changed: a torn tail cut, damage skipped,
// leases of a crashed process made ready again.
func noteRecovery(w io.Writer, r queue.Recovery) {
	if t := r.Log.Torn; t != nil {
		fmt.Fprintf(w, "walq: note: cut a torn log tail: %s\n", describeDamage(*t))
	}
	for _, d := range r.Log.Salvaged {
		fmt.Fprintf(w, "walq: note: skipped damaged log entries: %s\n", describeDamage(d))
	}
	switch {
	case r.Requeued > 0 && r.DeadOnOpen > 0:
		fmt.Fprintf(w, "walq: note: the previous process crashed; %d of its leases %s ready again (%d of them dead after too many deliveries)\n",
			r.Requeued, isAre(r.Requeued), r.DeadOnOpen)
	case r.Requeued > 0: // always so for the owner's open (ownerOptions): it dead-letters nothing
		fmt.Fprintf(w, "walq: note: the previous process crashed; %d of its leases %s ready again\n", r.Requeued, isAre(r.Requeued))
	}
}

// shortTime formats t for people, in UTC; "-" when zero.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// jsonTime formats t for JSON output; "" (omitted) when zero.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// sizeText formats a byte count in IEC units.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// isAre returns the verb for n things: "is" for one, else "are".
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// plural formats a count with its noun, adding an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// segmentFiles returns the paths of the log segment files of the queue in
// dir, oldest first: the files of DIR/log named by 20 digits.
func segmentFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		if isSegmentName(de.Name()) && de.Type().IsRegular() {
			out = append(out, filepath.Join(dir, "log", de.Name()))
		}
	}
	return out, nil
}

// isSegmentName reports whether name is a segment file name.
func isSegmentName(name string) bool {
	if len(name) != 20 {
		return false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// looksLikeURL reports whether target starts with a URL scheme and "://"
// (RFC 3986: a letter, then letters, digits, '+', '-' or '.').
func looksLikeURL(target string) bool {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok || scheme == "" {
		return false
	}
	for i, r := range scheme {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}
