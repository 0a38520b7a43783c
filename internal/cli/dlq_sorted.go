package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walq/walq/internal/twin"
	"github.com/walq/walq/queue"
)

// sortedDir opens dir as its sorted or windowed queue, read-only or not;
// nil when dir holds an ack queue. Like openDir, an open that may write
// prints on stderr what it repaired, if anything.
func sortedDir(e *env, dir string, readOnly bool) (sortedView, error) {
	return sortedDirWith(e, dir, sortedOptions(readOnly))
}

// sortedDirWith is sortedDir opening the queue with o.
func sortedDirWith(e *env, dir string, o queue.Options) (sortedView, error) {
	if err := checkQueueDir(dir); err != nil {
		return nil, err
	}
	id, err := dirIdentity(dir)
	if err != nil || !isSorted(id) {
		return nil, err
	}
	sv, err := openSortedView(dir, id, o)
	if err != nil {
		return nil, err
	}
	switch {
	case o.ReadOnly && sv.inUse():
		noteInspect(e.stderr, dir, true, queue.Recovery{})
	case !o.ReadOnly:
		noteRecovery(e.stderr, sv.recovery())
	}
	return sv, nil
}

// closeView closes sv, keeping the first error.
func closeView(sv sortedView, err *error) {
	if cerr := sv.close(); *err == nil && cerr != nil {
		*err = cerr
	}
}

// deadValueJSON is a dead value as dlq prints it with --json.
type deadValueJSON struct {
	ID          string `json:"id"` // SEQ@PUBLISHED_UNIX_NS (SEQ when its publish time cannot be read), the name dlq show, requeue and purge take
	Seq         uint64 `json:"seq"`
	Key         string `json:"key"`
	KeyBase64   string `json:"key_base64,omitempty"`
	Sort        string `json:"sort"`
	SortBase64  string `json:"sort_base64,omitempty"`
	Deliveries  int    `json:"deliveries"`
	PublishedAt string `json:"published_at,omitempty"`
	Reason      string `json:"reason"`
	Reason64    string `json:"reason_base64,omitempty"`
	Bytes       int    `json:"payload_bytes"`
	Payload     string `json:"payload"`
	Encoding    string `json:"payload_encoding"`
}

func toDeadValueJSON(d deadValueRow) deadValueJSON {
	p, enc := payloadText(d.Payload)
	j := deadValueJSON{ID: nameOf(d).String(), Seq: d.Seq, Sort: d.Sort, Deliveries: d.Deliveries,
		PublishedAt: jsonTime(d.PublishedAt), Reason: d.Reason, Bytes: len(d.Payload), Payload: p, Encoding: enc}
	j.Key, j.KeyBase64 = twin.Split(d.Key)
	j.Sort, j.SortBase64 = twin.Split(d.Sort)
	j.Reason, j.Reason64 = twin.Split(d.Reason)
	return j
}

// eachDeadValue calls fn for every dead value in sequence order until it
// returns false.
func eachDeadValue(sv sortedView, fn func(deadValueRow) bool) error {
	return eachPaged(sv.deadValues, func(d deadValueRow) uint64 { return d.Seq }, fn)
}

func listDeadValues(e *env, sv sortedView, asJSON bool, limit int) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ID\tSEQ\tKEY\tSORT\tDELIVERIES\tPUBLISHED\tBYTES\tREASON")
	}
	n := 0
	var werr error
	err := eachDeadValue(sv, func(d deadValueRow) bool {
		if asJSON {
			werr = enc.Encode(toDeadValueJSON(d))
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%d\t%s\n", nameOf(d), d.Seq, d.Key, d.Sort, d.Deliveries,
				shortTime(d.PublishedAt), len(d.Payload), d.Reason)
		}
		n++
		return werr == nil && (limit <= 0 || n < limit)
	})
	if err == nil {
		err = werr
	}
	if ferr := tw.Flush(); err == nil && !asJSON {
		err = ferr
	}
	return err
}

// deadName names a dead value: its sequence number and, when fenced, its
// publish time in unix ns. A sequence number alone may name another value
// after a power loss (see queue.Sorted.RequeueDead); the time tells them
// apart.
type deadName struct {
	seq    uint64
	at     int64
	fenced bool
}

// nameOf returns d's fenced name, or its seq alone when its publish time
// is zero: the record it was read from is damaged, and no time would
// match it (requeue and purge then refuse the fenced name as corrupt).
func nameOf(d deadValueRow) deadName {
	if d.PublishedAt.IsZero() {
		return deadName{seq: d.Seq}
	}
	return deadName{seq: d.Seq, at: d.PublishedAt.UnixNano(), fenced: true}
}

// String returns the name as parseDeadName reads it: SEQ@UNIXNANOS, or
// SEQ when it is not fenced.
func (n deadName) String() string {
	s := strconv.FormatUint(n.seq, 10)
	if n.fenced {
		s += "@" + strconv.FormatInt(n.at, 10)
	}
	return s
}

// parseDeadName reads a dead value's name: SEQ@UNIXNANOS as dlq list and
// show print it, or a bare SEQ.
func parseDeadName(s string) (deadName, error) {
	seqText, atText, fenced := strings.Cut(s, "@")
	n := deadName{fenced: fenced}
	var err error
	n.seq, err = strconv.ParseUint(seqText, 10, 64)
	if err == nil && fenced {
		n.at, err = strconv.ParseInt(atText, 10, 64)
	}
	if err != nil || n.seq == 0 {
		return deadName{}, usagef("a sorted queue's dead values are named SEQ@PUBLISHED_UNIX_NS (as dlq list prints them) or by their sequence number, not %q", s)
	}
	return n, nil
}

// staleName explains an error of the dead value named n: a fenced name
// that names no dead value now was read before the value was requeued or
// purged, or before a crash lost it.
func staleName(n deadName, err error) error {
	if n.fenced && errors.Is(err, queue.ErrNotFound) {
		return fmt.Errorf("%w; run walq dlq list for the names of the dead values now", err)
	}
	return err
}

func showDeadValue(e *env, sv sortedView, arg string, asJSON bool) error {
	n, err := parseDeadName(arg)
	if err != nil {
		return err
	}
	ds, err := sv.deadValues(n.seq, 1)
	if err != nil {
		return err
	}
	if len(ds) == 0 || ds[0].Seq != n.seq {
		return staleName(n, fmt.Errorf("%w: no dead value %d", queue.ErrNotFound, n.seq))
	}
	if at := ds[0].PublishedAt.UnixNano(); n.fenced && at != n.at {
		return staleName(n, fmt.Errorf("%w: no dead value %d published at %s: the dead value %d was published at %s", queue.ErrNotFound,
			n.seq, jsonTime(time.Unix(0, n.at)), n.seq, jsonTime(ds[0].PublishedAt)))
	}
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(toDeadValueJSON(ds[0]))
	}
	printDeadValue(e.stdout, ds[0])
	return nil
}

// printDeadValue prints one dead value for people.
func printDeadValue(w io.Writer, d deadValueRow) {
	j := toDeadValueJSON(d)
	fmt.Fprintf(w, "id:         %s\nseq:        %d\nkey:        %s\nsort:       %s\ndeliveries: %d\npublished:  %s\nreason:     %s\n",
		j.ID, j.Seq, d.Key, d.Sort, j.Deliveries, shortTime(d.PublishedAt), d.Reason)
	fmt.Fprintf(w, "payload:    %d bytes, %s\n%s\n", j.Bytes, j.Encoding, j.Payload)
}

// changeDeadValues requeues or purges one dead value or all of them.
func changeDeadValues(e *env, sv sortedView, args []string, all, purge bool) error {
	verb := map[bool]string{false: "requeued", true: "purged"}[purge]
	if all {
		change := sv.requeueAllDead
		if purge {
			change = sv.purgeAllDead
		}
		n, err := change()
		fmt.Fprintf(e.stdout, "%s %s\n", verb, plural(n, "dead value"))
		return err
	}
	n, err := parseDeadName(args[1])
	if err != nil {
		return err
	}
	if purge {
		err = sv.purgeDead(n)
	} else {
		err = sv.requeueDead(n)
	}
	if err != nil {
		return staleName(n, err)
	}
	fmt.Fprintf(e.stdout, "%s %s\n", verb, n)
	return nil
}
