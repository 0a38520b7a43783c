package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/walq/walq/queue"
)

// sortedDir opens dir as its sorted or windowed queue, read-only or not;
// nil when dir holds an ack queue.
func sortedDir(e *env, dir string, readOnly bool) (sortedView, error) {
	if err := checkQueueDir(dir); err != nil {
		return nil, err
	}
	id, err := dirIdentity(dir)
	if err != nil || !isSorted(id) {
		return nil, err
	}
	sv, err := openSortedView(dir, id, readOnly)
	if err != nil {
		return nil, err
	}
	if readOnly && sv.inUse() {
		noteInspect(e.stderr, dir, true, queue.Recovery{})
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
	Seq         uint64 `json:"seq"`
	Key         string `json:"key"`
	Sort        string `json:"sort"`
	Deliveries  int    `json:"deliveries"`
	PublishedAt string `json:"published_at,omitempty"`
	Reason      string `json:"reason"`
	Bytes       int    `json:"payload_bytes"`
	Payload     string `json:"payload"`
	Encoding    string `json:"payload_encoding"`
}

func toDeadValueJSON(d deadValueRow) deadValueJSON {
	p, enc := payloadText(d.Payload)
	return deadValueJSON{Seq: d.Seq, Key: d.Key, Sort: d.Sort, Deliveries: d.Deliveries,
		PublishedAt: jsonTime(d.PublishedAt), Reason: d.Reason, Bytes: len(d.Payload), Payload: p, Encoding: enc}
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
		fmt.Fprintln(tw, "SEQ\tKEY\tSORT\tDELIVERIES\tPUBLISHED\tBYTES\tREASON")
	}
	n := 0
	var werr error
	err := eachDeadValue(sv, func(d deadValueRow) bool {
		if asJSON {
			werr = enc.Encode(toDeadValueJSON(d))
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%s\n", d.Seq, d.Key, d.Sort, d.Deliveries,
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

// parseSeq reads a dead value's sequence number.
func parseSeq(s string) (uint64, error) {
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 {
		return 0, usagef("a sorted queue's dead values are named by their sequence number, not %q", s)
	}
	return seq, nil
}

func showDeadValue(e *env, sv sortedView, arg string, asJSON bool) error {
	seq, err := parseSeq(arg)
	if err != nil {
		return err
	}
	ds, err := sv.deadValues(seq, 1)
	if err != nil {
		return err
	}
	if len(ds) == 0 || ds[0].Seq != seq {
		return fmt.Errorf("%w: no dead value %d", queue.ErrNotFound, seq)
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
	fmt.Fprintf(w, "seq:        %d\nkey:        %s\nsort:       %s\ndeliveries: %d\npublished:  %s\nreason:     %s\n",
		j.Seq, j.Key, j.Sort, j.Deliveries, shortTime(d.PublishedAt), j.Reason)
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
		fmt.Fprintf(e.stdout, "%s %d dead values\n", verb, n)
		return err
	}
	seq, err := parseSeq(args[1])
	if err != nil {
		return err
	}
	if purge {
		err = sv.purgeDead(seq)
	} else {
		err = sv.requeueDead(seq)
	}
	if err == nil {
		fmt.Fprintf(e.stdout, "%s %d\n", verb, seq)
	}
	return err
}
