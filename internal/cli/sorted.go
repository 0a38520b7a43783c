package cli

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/walq/walq/queue"
)

// deadValueRow is a sorted queue's dead value with its sort key as text.
type deadValueRow struct {
	Seq         uint64
	Key         string
	Sort        string
	Reason      string
	Deliveries  int
	PublishedAt time.Time
	Payload     []byte
}

// sortedView is a sorted or windowed queue seen without its key type: the
// calls the CLI makes.
type sortedView interface {
	deadValues(from uint64, max int) ([]deadValueRow, error)
	requeueDead(n deadName) error
	purgeDead(n deadName) error
	requeueAllDead() (int, error)
	purgeAllDead() (int, error)
	requeueExpired() (int, error)
	stats() queue.Stats
	readStats() (queue.Stats, error)
	identity() queue.Identity
	compact() error
	recovery() queue.Recovery
	inUse() bool
	close() error
}

// typedView is a sortedView of a Sorted[K]: its dead values as an
// engine's (setView), and its files.
type typedView[K queue.SortKey] struct {
	setView[K]
	s *queue.Sorted[K]
}

// newTypedView returns the view of s.
func newTypedView[K queue.SortKey](s *queue.Sorted[K], text func(K) string) typedView[K] {
	return typedView[K]{setView: setView[K]{q: s, text: text}, s: s}
}

func (v typedView[K]) recovery() queue.Recovery { return v.s.Recovery() }
func (v typedView[K]) compact() error           { return v.s.Compact() }
func (v typedView[K]) inUse() bool              { return v.s.InUse() }
func (v typedView[K]) identity() queue.Identity { return v.s.Identity() }
func plainText[K queue.SortKey](k K) string     { return fmt.Sprint(k) }
func timeText(t time.Time) string               { return jsonTime(t) }
func hexText(s string) string                   { return hex.EncodeToString([]byte(s)) }

// openView opens dir as a Sorted[K] with o.
func openView[K queue.SortKey](dir string, o queue.Options, text func(K) string) (sortedView, error) {
	s, err := queue.OpenSorted[K](dir, &queue.SortedOptions{Options: o})
	if err != nil {
		return nil, err
	}
	return newTypedView(s, text), nil
}

// sortedOptions are the options a sorted or windowed queue is opened
// with: read-only, or as ownerOptions makes them.
func sortedOptions(readOnly bool) queue.Options {
	if readOnly {
		return *inspectOptions()
	}
	return *ownerOptions(nil)
}

// openSortedView opens the sorted or windowed queue in dir with the sort
// key type its identity names, and o (sortedOptions). A directory written
// before identity files does not say; its sort keys are shown as hex.
func openSortedView(dir string, id queue.Identity, o queue.Options) (sortedView, error) {
	if id.Kind == queue.KindWindowed {
		// The window is the application's; listing and changing the dead
		// set does not use it.
		w, err := queue.OpenWindowed(dir, &queue.WindowOptions{Window: time.Second,
			SortedOptions: queue.SortedOptions{Options: o}})
		if err != nil {
			return nil, err
		}
		return newTypedView(w.Sorted, timeText), nil
	}
	switch id.SortKey {
	case "int":
		return openView(dir, o, plainText[int])
	case "int8":
		return openView(dir, o, plainText[int8])
	case "int16":
		return openView(dir, o, plainText[int16])
	case "int32":
		return openView(dir, o, plainText[int32])
	case "int64":
		return openView(dir, o, plainText[int64])
	case "uint":
		return openView(dir, o, plainText[uint])
	case "uint8":
		return openView(dir, o, plainText[uint8])
	case "uint16":
		return openView(dir, o, plainText[uint16])
	case "uint32":
		return openView(dir, o, plainText[uint32])
	case "uint64":
		return openView(dir, o, plainText[uint64])
	case "float32":
		return openView(dir, o, plainText[float32])
	case "float64":
		return openView(dir, o, plainText[float64])
	case "string":
		return openView(dir, o, plainText[string])
	case "time":
		return openView(dir, o, timeText)
	case "":
		if !o.ReadOnly {
			return nil, fmt.Errorf("%s was written before queue directories recorded their sort key type; open it once with OpenSorted[K] from the application, then run this again", dir)
		}
		return openView(dir, o, hexText)
	}
	return nil, fmt.Errorf("%s: unknown sort key type %q", dir, id.SortKey)
}

// dirIdentity returns what dir says it holds; for a directory written
// before identity files, what a read-only open infers from its log.
func dirIdentity(dir string) (queue.Identity, error) {
	id, err := queue.ReadIdentity(dir)
	if err == nil {
		return id, nil
	}
	q, oerr := queue.Open(dir, inspectOptions())
	if oerr != nil {
		return id, oerr
	}
	id = q.Identity()
	return id, q.Close()
}

// isSorted reports whether id is a sorted or windowed queue.
func isSorted(id queue.Identity) bool {
	return id.Kind == queue.KindSorted || id.Kind == queue.KindWindowed
}

// kindText describes id for people: "ack", "sorted (int64 sort keys)".
func kindText(id queue.Identity) string {
	switch {
	case id.Kind == 0:
		return "unknown (no identity file and no records)"
	case !isSorted(id):
		return id.Kind.String()
	case id.SortKey == "":
		return id.Kind.String() + " (sort key type not recorded)"
	}
	return fmt.Sprintf("%s (%s sort keys)", id.Kind, id.SortKey)
}
