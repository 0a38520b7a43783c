package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/walq/walq/internal/damage"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/recovery"
)

// segmentsShown is how many segments stats lists at each end of a long log.
const segmentsShown = 5

var statsCmd = &command{
	name:  "stats",
	args:  "[--json] [--segments] DIR | [--json] [--watch] --url URL",
	short: "counts, ages, bytes on disk, log positions",
	long: `Stats prints what the queue in DIR is (ack, sorted or windowed, and the
sort key type), how many messages it holds (ready, in flight, delayed,
dead; for a sorted queue, pending values, keys, leased batches and dead
values), how old the oldest is, the bytes on disk of every log segment
and snapshot, the live bytes against the log bytes, the last snapshot and
the log positions, and the lifetime totals.

Stats writes nothing: it reads the newest snapshot and replays the log
after it in memory. A torn log tail, or the leases of a process that
crashed, are reported and left for the next open to handle. A queue that
another process has open is read too, as its files stand: the figures
are as of that process's last write, and stats says so on stderr.

The sync mode and ack timeout shown are walq's own; the directory does not
record those of the application that writes it, nor its dedup window. The
dedup ids are those the files remember: the ids of live messages, and of
acked ones the snapshot kept or acked since it, as the application's open
holds them with a dedup window, before its first enqueue forgets the ids
its window has passed. An application with no window forgets at its open
the ids acked since the snapshot, which stats still counts.

With --url, stats reads the figures of a running service from its mounted
dashboard (package dashboard) and changes nothing; --watch refreshes them.
When a failed write has poisoned the service's log (or that of a queue an
engine serves) and the log could not be read back, its counts are those of
its calls, failed ones included: stats says so under them, and why
(counts_error in --json). When the
record of the oldest never-delivered message (of a sorted or windowed
queue: the oldest pending or leased value) cannot be read (damage, or a
read error), the age of the oldest message leaves it out: stats says so
beside it, and why (oldest_error in --json), of a directory too. A
sorted or windowed Redis queue written by a release that kept no age set
gives no publish time for its values: stats prints the age as unknown
(oldest_unknown in --json), never as none.

Stats prints its figures in full even then, and exits non-zero after
them: 2 when the record, or the log behind the counts, is damaged, and 1
for another read error (a failing disk), or when both fail, 2 if either
is damage. With --url the dashboard says
which (oldest_corrupt, counts_corrupt in --json); one too old to say
gets 1. --watch goes on refreshing through these, since the figures
still show, and exits, after its last refresh, with the status of that
refresh; a dashboard it cannot read ends it at once.`,
	example: `walq stats /var/lib/app/jobs
walq stats --json /var/lib/app/jobs | jq .ready
walq stats --watch --url http://localhost:8080/queue/`,
	exits: []int{exitOK, exitFailure, exitCorrupt},
	exitNotes: map[int]string{
		exitFailure: "usage error or failure; or, the figures printed, a read error kept stats from reading the oldest record or the counts' log",
		exitCorrupt: "the queue is corrupt; or, the figures printed, the oldest record or the counts' log is damaged",
	},
	nargs: [2]int{0, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		asJSON := fs.Bool("json", false, "print one JSON object")
		all := fs.Bool("segments", false, "list every segment (the text lists the first and last few)")
		return withRemote(addRemoteFlags(fs, true), 0, remoteStatsCmd(asJSON), // remote.go
			func(e *env, args []string) error { return runStats(e, args[0], *asJSON, *all) })
	},
}

// statsReport is what stats prints; its JSON form is stats --json.
type statsReport struct {
	Dir string `json:"dir"`
	countsJSON
	LiveBytes   int64         `json:"live_bytes"`
	LogBytes    int64         `json:"log_bytes"`
	Segments    []segmentJSON `json:"segments"`
	Snapshots   []fileJSON    `json:"snapshots"`
	SnapshotLSN uint64        `json:"snapshot_lsn"`
	LastLSN     uint64        `json:"last_lsn"`
	DurableLSN  uint64        `json:"durable_lsn"`
	Sync        string        `json:"sync"`
	AckTimeout  string        `json:"ack_timeout"`
	Totals      totalsJSON    `json:"totals"`
	Kind        string        `json:"kind"`               // ack, sorted, windowed
	SortKey     string        `json:"sort_key,omitempty"` // a sorted queue's sort key type
	Format      int           `json:"format"`             // the directory's format version
	InUse       bool          `json:"in_use"`             // another process has it open: figures as of its last write
	CleanClose  bool          `json:"clean_close"`        // the last process closed it cleanly
	TornBytes   int64         `json:"torn_tail_bytes"`    // a torn log tail the next open cuts
	Sorted      *sortedJSON   `json:"sorted,omitempty"`   // sorted and windowed queues
}

// countsJSON are an ack queue's counts, of either engine.
type countsJSON struct {
	Ready     int64   `json:"ready"`
	InFlight  int64   `json:"in_flight"`
	Delayed   int64   `json:"delayed"`
	Dead      int64   `json:"dead"`
	OldestAt  string  `json:"oldest_enqueued_at,omitempty"`
	OldestAge float64 `json:"oldest_age_seconds"` // 0 when the queue is empty
	DedupIDs  int     `json:"dedup_ids"`
	// OldestError is queue.Stats.OldestErr: the record of the oldest
	// never-delivered message could not be read, and the age above
	// leaves that message out.
	OldestError string `json:"oldest_error,omitempty"`
	// CountsError is queue.Stats.CountsErr: the counts could not be read
	// back from the log after a failed write, and are the calls'.
	CountsError string `json:"counts_error,omitempty"`
}

func newCounts(s queue.Stats) countsJSON {
	c := countsJSON{Ready: s.Ready, InFlight: s.InFlight, Delayed: s.Delayed, Dead: s.Dead, DedupIDs: s.DedupIDs}
	if !s.OldestEnqueuedAt.IsZero() {
		c.OldestAt = jsonTime(s.OldestEnqueuedAt)
		c.OldestAge = ageAt(s.At, s.OldestEnqueuedAt).Seconds()
	}
	if s.OldestErr != nil {
		c.OldestError = s.OldestErr.Error()
	}
	if s.CountsErr != nil {
		c.CountsError = s.CountsErr.Error()
	}
	return c
}

// ageAt returns how old t is at at, when the queue read its figures by its
// own clock (Stats.At), or now when at is zero (an engine that leaves it so).
func ageAt(at, t time.Time) time.Duration {
	if at.IsZero() {
		return time.Since(t)
	}
	return at.Sub(t)
}

func newTotals(s queue.Stats) totalsJSON {
	return totalsJSON{s.Enqueued, s.Delivered, s.Acked, s.Nacked, s.Expired, s.DeadLettered, s.Moved}
}

// sortedJSON is a sorted queue's part of stats.
type sortedJSON struct {
	Pending      int    `json:"pending"`
	Keys         int    `json:"keys"`
	Batches      int    `json:"leased_batches"`
	Leased       int    `json:"leased_values"`
	Dead         int    `json:"dead"`
	Published    uint64 `json:"published"`
	Pulled       uint64 `json:"pulled"`
	BatchesAcked uint64 `json:"batches_acked"`
	// OldestUnknown: values are pending or leased, but the queue names
	// no publish time for them and no error (a Redis queue written by a
	// release that kept no age set): the age is unknown, not none.
	OldestUnknown bool `json:"oldest_unknown,omitempty"`
}

type segmentJSON struct {
	Path     string `json:"path"`
	FirstLSN uint64 `json:"first_lsn"`
	Bytes    int64  `json:"bytes"`
}

type fileJSON struct {
	Path  string `json:"path"`
	LSN   uint64 `json:"lsn"`
	Bytes int64  `json:"bytes"`
}

type totalsJSON struct {
	Enqueued     uint64 `json:"enqueued"`
	Delivered    uint64 `json:"delivered"`
	Acked        uint64 `json:"acked"`
	Nacked       uint64 `json:"nacked"`
	Expired      uint64 `json:"expired"`
	DeadLettered uint64 `json:"dead_lettered"`
	Moved        uint64 `json:"moved"`
}

func runStats(e *env, dir string, asJSON, all bool) (err error) {
	if e.owns(dir) {
		return runEngineStats(e, dir, asJSON) // engine.go
	}
	q, err := inspectQueue(e, dir)
	if err != nil {
		return err
	}
	defer closeQueue(q, &err)
	s := q.Stats()
	r, err := buildStats(dir, s, q.Recovery())
	if err != nil {
		return err
	}
	addIdentity(r, q)
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		printStats(e.stdout, r, all)
	}
	return statsUnread(s, r.Sorted != nil)
}

// statsUnread returns what stats ends with, its figures printed, when
// the queue could not read its counts back from its log (Stats.CountsErr)
// or the record of its oldest message (Stats.OldestErr; oldestName says
// which, by kind): exit status 2 when either is damage, 1 for another
// read error; nil when neither.
func statsUnread(s queue.Stats, sorted bool) error {
	var errs []error
	code := exitFailure
	for _, u := range []struct {
		err  error
		what string
	}{
		{s.CountsErr, "the counts could not be checked against the log"},
		{s.OldestErr, "the record of " + oldestName(sorted) + " could not be read"},
	} {
		if u.err == nil {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %w", u.what, u.err))
		if damage.Is(u.err) {
			code = exitCorrupt
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return withExit(code, errors.Join(errs...))
}

// buildStats gathers the queue's statistics and its snapshot files.
func buildStats(dir string, s queue.Stats, rec queue.Recovery) (*statsReport, error) {
	snaps, err := recovery.List(dir)
	if err != nil {
		return nil, err
	}
	r := &statsReport{Dir: dir, countsJSON: newCounts(s), LiveBytes: s.LiveBytes, LogBytes: s.LogBytes,
		SnapshotLSN: s.SnapshotLSN, LastLSN: s.LastLSN, DurableLSN: s.DurableLSN, Sync: syncName(s.Sync),
		AckTimeout: s.AckTimeout.String(), Totals: newTotals(s), Segments: []segmentJSON{}, Snapshots: []fileJSON{}}
	for _, sg := range s.Segments {
		r.Segments = append(r.Segments, segmentJSON{Path: sg.Path, FirstLSN: sg.FirstLSN, Bytes: sg.Bytes})
	}
	for _, sn := range snaps {
		r.Snapshots = append(r.Snapshots, fileJSON{Path: sn.Path, LSN: sn.LSN, Bytes: sn.Bytes})
	}
	r.CleanClose = rec.Clean
	if rec.Log.Torn != nil {
		r.TornBytes = rec.Log.Torn.Bytes
	}
	return r, nil
}

// addIdentity adds what the directory is, and a sorted queue's counts.
func addIdentity(r *statsReport, q *queue.Queue) {
	id := q.Identity()
	r.Kind, r.SortKey, r.Format, r.InUse = id.Kind.String(), id.SortKey, id.Format, q.InUse()
	if id.Kind == 0 {
		r.Kind = "unknown"
	}
	if !isSorted(id) {
		return
	}
	r.Sorted = newSorted(q.Stats())
}

// newSorted returns a sorted queue's part of stats.
func newSorted(s queue.Stats) *sortedJSON {
	return &sortedJSON{Pending: s.SortedPending, Keys: s.SortedKeys, Batches: s.SortedBatches,
		Leased: s.SortedLeased, Dead: s.SortedDead, Published: s.Published, Pulled: s.Pulled, BatchesAcked: s.BatchesAcked,
		OldestUnknown: s.OldestEnqueuedAt.IsZero() && s.OldestErr == nil && s.SortedPending+s.SortedLeased > 0}
}

// syncName names a sync mode as the options do.
func syncName(m queue.SyncMode) string {
	switch m {
	case queue.SyncAlways:
		return "always"
	case queue.SyncInterval:
		return "interval"
	case queue.SyncNever:
		return "never"
	}
	return fmt.Sprintf("unknown(%d)", m)
}

// printStats prints r for people.
func printStats(w io.Writer, r *statsReport, all bool) {
	fmt.Fprintf(w, "queue %s\n", r.Dir)
	fmt.Fprintf(w, "  kind        %s\n", kindLine(r))
	if r.Sorted != nil {
		printSortedCounts(w, r)
	} else {
		printCounts(w, r)
	}
	printDisk(w, r, all)
	fmt.Fprintf(w, "log positions\n  last LSN %d, durable %d, last snapshot at LSN %d\n", r.LastLSN, r.DurableLSN, r.SnapshotLSN)
	printTotals(w, r)
	printUnchecked(w, r.CountsError)
	fmt.Fprintf(w, "walq's own settings\n  sync %s, ack timeout %s\n", r.Sync, r.AckTimeout)
}

// printSortedCounts prints a sorted queue's counts and the age of its
// oldest pending or leased value: "unknown" when the queue names none
// (sortedJSON.OldestUnknown).
func printSortedCounts(w io.Writer, r *statsReport) {
	s := r.Sorted
	fmt.Fprintf(w, "  pending     %d values in %d keys\n  leased      %d values in %d batches\n  dead        %d\n",
		s.Pending, s.Keys, s.Leased, s.Batches, s.Dead)
	oldest := oldestText(r)
	if s.OldestUnknown {
		oldest = "unknown"
	}
	fmt.Fprintf(w, "  oldest      %s\n", oldest)
}

// printCounts prints an ack queue's counts.
func printCounts(w io.Writer, r *statsReport) {
	fmt.Fprintf(w, "  ready       %d\n  in flight   %d\n  delayed     %d\n  dead        %d\n", r.Ready, r.InFlight, r.Delayed, r.Dead)
	fmt.Fprintf(w, "  oldest      %s\n", oldestText(r))
	fmt.Fprintf(w, "  dedup ids   %d\n", r.DedupIDs)
}

// printTotals prints the lifetime counters.
func printTotals(w io.Writer, r *statsReport) {
	t := r.Totals
	if s := r.Sorted; s != nil {
		fmt.Fprintf(w, "lifetime\n  published %d, pulled %d batches, acked %d batches, moved %d\n",
			s.Published, s.Pulled, s.BatchesAcked, t.Moved)
	} else {
		fmt.Fprintf(w, "lifetime\n  enqueued %d, delivered %d, acked %d, nacked %d, expired %d, dead-lettered %d, moved %d\n",
			t.Enqueued, t.Delivered, t.Acked, t.Nacked, t.Expired, t.DeadLettered, t.Moved)
	}
}

// printUnchecked says, when why is not empty, that the counts above are
// not the log's, and why.
func printUnchecked(w io.Writer, why string) {
	if why != "" {
		fmt.Fprintf(w, "counts not checked: the log could not be read back after a failed write; "+
			"the counts are those of the calls, failed ones included, not what the log holds: %s\n", why)
	}
}

// kindLine is the kind, its sort key type and the format version.
func kindLine(r *statsReport) string {
	return fmt.Sprintf("%s (format %d)", kindName(r), r.Format)
}

// kindName is the kind and its sort key type.
func kindName(r *statsReport) string {
	if r.SortKey != "" {
		return r.Kind + ", " + r.SortKey + " sort keys"
	}
	return r.Kind
}

// oldestText is the age of the oldest live message, or "none", and why a
// message is left out of it.
func oldestText(r *statsReport) string {
	text := "none"
	if r.OldestAt != "" {
		age := time.Duration(r.OldestAge * float64(time.Second)).Round(time.Millisecond)
		text = fmt.Sprintf("%s ago (enqueued %s)", age, r.OldestAt)
	}
	return text + unreadOldest(r.OldestError, r.Sorted != nil)
}

// unreadOldest says why the age of the oldest message leaves one out
// (Stats.OldestErr, as text); "" when none is.
func unreadOldest(why string, sorted bool) string {
	if why == "" {
		return ""
	}
	return "; the record of " + oldestName(sorted) + " could not be read, and is left out: " + why
}

// oldestName is what the age of the oldest message is taken from: an
// ack queue's oldest never-delivered message, a sorted or windowed
// queue's oldest pending or leased value.
func oldestName(sorted bool) string {
	if sorted {
		return "the oldest pending or leased value"
	}
	return "the oldest never-delivered message"
}

// printDisk prints the bytes on disk, file by file.
func printDisk(w io.Writer, r *statsReport, all bool) {
	total := r.LogBytes
	for _, s := range r.Snapshots {
		total += s.Bytes
	}
	fmt.Fprintf(w, "disk          %s in %s and %s\n", sizeText(total),
		plural(len(r.Segments), "segment"), plural(len(r.Snapshots), "snapshot"))
	pct := 0.0
	if r.LogBytes > 0 {
		pct = 100 * float64(r.LiveBytes) / float64(r.LogBytes)
	}
	fmt.Fprintf(w, "  log         %s, of which live %s (%.0f%%)\n", sizeText(r.LogBytes), sizeText(r.LiveBytes), pct)
	segs := r.Segments
	if !all && len(segs) > 2*segmentsShown {
		segs = segs[:segmentsShown]
	}
	for _, s := range segs {
		fmt.Fprintf(w, "    %-36s %10s  first LSN %d\n", filepath.Base(s.Path), sizeText(s.Bytes), s.FirstLSN)
	}
	if len(segs) < len(r.Segments) {
		fmt.Fprintf(w, "    … %d more segments (--segments lists them all)\n", len(r.Segments)-2*segmentsShown)
		for _, s := range r.Segments[len(r.Segments)-segmentsShown:] {
			fmt.Fprintf(w, "    %-36s %10s  first LSN %d\n", filepath.Base(s.Path), sizeText(s.Bytes), s.FirstLSN)
		}
	}
	for _, s := range r.Snapshots {
		fmt.Fprintf(w, "    %-36s %10s  at LSN %d\n", filepath.Base(s.Path), sizeText(s.Bytes), s.LSN)
	}
}
