package cli

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/walq/walq/internal/twin"
	"github.com/walq/walq/queue"
)

// dlqPage is how many dead letters are read at a time.
const dlqPage = 256

var dlqExits = []int{exitOK, exitFailure, exitCorrupt, exitLocked, exitNotFound}

var dlqListCmd = &command{
	name:  "dlq list",
	args:  "[--json] [--limit N] DIR | [--json] [--limit N] --url URL",
	short: "list the dead letters",
	long: `Dlq list prints the dead letters of the queue in DIR, oldest first: id,
sequence, deliveries, enqueue time, payload bytes and the reason it was
dead-lettered. For a sorted or windowed queue it prints the dead values:
id (SEQ@PUBLISHED_UNIX_NS; SEQ alone when its publish time cannot be
read), sequence, key, sort key, deliveries, publish time, payload bytes
and reason. With --json, one JSON object a line,
payload included (as text when printable, else base64).
` + base64Note + `
With --url, it reads them from a running service's mounted dashboard
(package dashboard), without payloads; the dashboard sends an id or
reason that is not valid UTF-8 in the same base64 twins, so both forms
print the same bytes. (From a dashboard older than the twins only the
id, which its ref carries in hex, comes back whole; such a reason
arrives with U+FFFD.)

Dlq list and dlq show write nothing, and read a queue that another
process has open as its files stand.`,
	example: `walq dlq list /var/lib/app/jobs
walq dlq list --json /var/lib/app/jobs | jq -r .id`,
	exits: dlqExits,
	nargs: [2]int{0, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		asJSON := fs.Bool("json", false, "one JSON object a line, with payloads")
		limit := fs.Int("limit", 0, "list at most `N` (0: all)")
		return withRemote(addRemoteFlags(fs, false), 0, remoteDLQList(asJSON, limit), // remote.go
			func(e *env, args []string) error { return runDLQList(e, args[0], *asJSON, *limit) })
	},
}

var dlqShowCmd = &command{
	name:  "dlq show",
	args:  "[--json] DIR ID | [--json] --url URL ID",
	short: "show one dead letter with its payload",
	long: `Dlq show prints the dead letter ID of the queue in DIR: its fields,
headers and payload (as text when printable, else base64). In a sorted or
windowed queue, ID is a dead value's id as dlq list prints it,
SEQ@PUBLISHED_UNIX_NS, or its bare sequence number (see dlq requeue).
With --json it prints one JSON object, as dlq list --json does.
` + base64Note + `
With --url, it reads the dead letter from a running service's mounted
dashboard (package dashboard), as dlq list --url does, and prints it as
from DIR, but for a payload longer than the dashboard's preview
(dashboard.Options.PreviewBytes, 4096 bytes by default): its first bytes
are printed, said to be a preview, and with --json payload_truncated is
true. The preview is printed in the whole payload's encoding, text or
base64, as the dashboard reports it (a service whose dashboard does not,
the preview's own). A sorted queue's dead value is named there by its id as dlq list
--url prints it (KEY/SEQ) or by SEQ@PUBLISHED_UNIX_NS, and shown as the
dashboard gives it: its key and sort key as headers.`,
	example: `walq dlq show /var/lib/app/jobs order-1234
walq dlq show --url http://localhost:8080/queue/ order-1234`,
	exits: dlqExits,
	nargs: [2]int{0, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		asJSON := fs.Bool("json", false, "print one JSON object")
		return withRemote(addRemoteFlags(fs, false), 1, remoteDLQShow(asJSON), // remote.go
			func(e *env, args []string) error { return runDLQShow(e, args[0], args[1], *asJSON) })
	},
}

var dlqRequeueCmd = &command{
	name:  "dlq requeue",
	args:  "DIR ID | --all DIR",
	short: "make dead letters ready again",
	long: `Dlq requeue makes the dead letter ID (or, with --all, every dead letter)
of the queue in DIR ready again, with its delivery count reset. In a
sorted or windowed queue, ID is a dead value's id as dlq list prints it,
SEQ@PUBLISHED_UNIX_NS, and the value goes back among the pending ones at
its sort key. An id whose sequence number now holds a value published at
another time is refused (exit status 5): after a power loss under
SyncNever or SyncInterval, a sequence number read before the crash can
name a value dead-lettered since. A bare sequence number is still taken,
unchecked: it can requeue that other value. A dead letter whose payload
cannot be read (dlq list shows its reason ending in "corrupt record: …")
is refused (exit status 2): requeued, it would only fail again. With
--all the others are requeued and the ones left are named (exit status
2). Purge such a letter, or run walq repair first.`,
	example: `walq dlq requeue /var/lib/app/jobs order-1234
walq dlq requeue --all /var/lib/app/jobs`,
	exits:        dlqExits,
	serverWrites: true,
	nargs:        [2]int{1, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		all := fs.Bool("all", false, "every dead letter")
		return func(e *env, args []string) error { return runDLQChange(e, args, *all, false) }
	},
}

var dlqPurgeCmd = &command{
	name:  "dlq purge",
	args:  "DIR ID | --all DIR",
	short: "remove dead letters for good",
	long: `Dlq purge removes the dead letter ID (or, with --all, every dead letter)
of the queue in DIR for good. In a sorted or windowed queue, ID is a dead
value's id, SEQ@PUBLISHED_UNIX_NS, checked as dlq requeue checks it; a
bare sequence number is taken unchecked, and after a power loss can name
another value.`,
	example: `walq dlq purge /var/lib/app/jobs order-1234
walq dlq purge --all /var/lib/app/jobs`,
	exits:        dlqExits,
	serverWrites: true,
	nargs:        [2]int{1, 2},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		all := fs.Bool("all", false, "every dead letter")
		return func(e *env, args []string) error { return runDLQChange(e, args, *all, true) }
	},
}

// deadJSON is a dead letter as dlq prints it with --json.
type deadJSON struct {
	ID         string            `json:"id"`
	IDBase64   string            `json:"id_base64,omitempty"`
	Seq        uint64            `json:"seq"`
	Deliveries int               `json:"deliveries"`
	EnqueuedAt string            `json:"enqueued_at,omitempty"`
	Reason     string            `json:"reason"`
	Reason64   string            `json:"reason_base64,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Headers64  map[string]string `json:"headers_base64,omitempty"`
	Bytes      int               `json:"payload_bytes"`
	Payload    string            `json:"payload"`
	Encoding   string            `json:"payload_encoding"`
	// Truncated is set when Payload holds only the first bytes of the
	// Bytes of the payload: a dashboard's preview (dlq show --url).
	Truncated bool `json:"payload_truncated,omitempty"`
}

func toDeadJSON(d queue.DeadLetter) deadJSON {
	p, enc := payloadText(d.Payload)
	j := deadJSON{Seq: d.Seq, Deliveries: d.Deliveries, EnqueuedAt: jsonTime(d.EnqueuedAt),
		Reason: d.Reason, Bytes: len(d.Payload), Payload: p, Encoding: enc}
	j.ID, j.IDBase64 = twin.Split(d.ID)
	j.Reason, j.Reason64 = twin.Split(d.Reason)
	j.Headers, j.Headers64 = twin.SplitHeaders(d.Headers)
	return j
}

// eachDead calls fn for every dead letter, oldest first, until it returns
// false.
func eachDead(q queue.AckQueue, fn func(queue.DeadLetter) bool) error {
	return eachPaged(q.DeadLetters, func(d queue.DeadLetter) uint64 { return d.Seq }, fn)
}

// eachPaged calls fn for every item that page returns, dlqPage at a time
// from sequence number 0 on, until fn returns false; seq names an item's
// sequence number.
func eachPaged[T any](page func(from uint64, max int) ([]T, error), seq func(T) uint64, fn func(T) bool) error {
	from := uint64(0)
	for {
		items, err := page(from, dlqPage)
		if err != nil {
			return err
		}
		for _, it := range items {
			if !fn(it) {
				return nil
			}
			from = seq(it) + 1
		}
		if len(items) < dlqPage {
			return nil
		}
	}
}

func runDLQList(e *env, dir string, asJSON bool, limit int) (err error) {
	sv, err := sortedTarget(e, dir, true)
	if err != nil {
		return err
	}
	if sv != nil {
		defer closeView(sv, &err)
		return listDeadValues(e, sv, asJSON, limit)
	}
	q, err := inspectAck(e, dir)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ID\tSEQ\tDELIVERIES\tENQUEUED\tBYTES\tREASON")
	}
	n := 0
	var werr error
	err = eachDead(q, func(d queue.DeadLetter) bool {
		if asJSON {
			werr = enc.Encode(toDeadJSON(d))
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\n", d.ID, d.Seq, d.Deliveries, shortTime(d.EnqueuedAt), len(d.Payload), d.Reason)
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

func runDLQShow(e *env, dir, id string, asJSON bool) (err error) {
	sv, err := sortedTarget(e, dir, true)
	if err != nil {
		return err
	}
	if sv != nil {
		defer closeView(sv, &err)
		return showDeadValue(e, sv, id, asJSON)
	}
	q, err := inspectAck(e, dir)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	var found *queue.DeadLetter
	err = eachDead(q, func(d queue.DeadLetter) bool {
		if d.ID == id {
			found = &d
		}
		return found == nil
	})
	if err != nil {
		return err
	}
	if found == nil {
		return fmt.Errorf("%w: no dead letter %q", queue.ErrNotFound, id)
	}
	if asJSON {
		return json.NewEncoder(e.stdout).Encode(toDeadJSON(*found))
	}
	printDead(e.stdout, *found)
	return nil
}

// printDead prints one dead letter for people.
func printDead(w io.Writer, d queue.DeadLetter) { printDeadPreview(w, d, len(d.Payload), "") }

// toDeadPreviewJSON is toDeadJSON for a dead letter whose payload has
// size bytes, of which d.Payload holds the first: a dashboard's preview.
// enc is the whole payload's encoding, which the preview is printed in;
// empty, the preview's own.
func toDeadPreviewJSON(d queue.DeadLetter, size int, enc string) deadJSON {
	j := toDeadJSON(d)
	j.Bytes, j.Truncated = size, size > len(d.Payload)
	if enc == "base64" && j.Encoding != enc {
		j.Payload, j.Encoding = base64.StdEncoding.EncodeToString(d.Payload), enc
	}
	return j
}

// printDeadPreview is printDead for a dead letter whose payload has size
// bytes, of which d.Payload holds the first, and whose whole payload's
// encoding is enc (empty: the preview's).
func printDeadPreview(w io.Writer, d queue.DeadLetter, size int, enc string) {
	j := toDeadPreviewJSON(d, size, enc)
	fmt.Fprintf(w, "id:         %s\nseq:        %d\ndeliveries: %d\nenqueued:   %s\nreason:     %s\n",
		d.ID, j.Seq, j.Deliveries, shortTime(d.EnqueuedAt), d.Reason)
	for _, k := range slices.Sorted(maps.Keys(d.Headers)) {
		fmt.Fprintf(w, "header:     %s=%s\n", k, d.Headers[k])
	}
	shown := ""
	if j.Truncated {
		shown = fmt.Sprintf(" (a preview: the first %d bytes)", len(d.Payload))
	}
	fmt.Fprintf(w, "payload:    %d bytes, %s%s\n%s\n", j.Bytes, j.Encoding, shown, j.Payload)
}

// runDLQChange requeues or purges one dead letter or all of them.
func runDLQChange(e *env, args []string, all, purge bool) (err error) {
	if all == (len(args) == 2) {
		return usagef("name one dead letter ID or give --all")
	}
	sv, err := sortedTarget(e, args[0], false)
	if err != nil {
		return err
	}
	if sv != nil {
		defer closeView(sv, &err)
		return changeDeadValues(e, sv, args, all, purge)
	}
	q, err := openAck(e, args[0], nil, false)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	verb := map[bool]string{false: "requeued", true: "purged"}[purge]
	if all {
		n, err := changeAllDead(q, purge)
		fmt.Fprintf(e.stdout, "%s %s\n", verb, plural(n, "dead letter"))
		return err
	}
	if purge {
		err = q.PurgeDead(args[1])
	} else {
		err = q.RequeueDead(args[1])
	}
	if err == nil {
		fmt.Fprintf(e.stdout, "%s %s\n", verb, args[1])
	}
	return err
}

func changeAllDead(q queue.AckQueue, purge bool) (int, error) {
	if purge {
		return q.PurgeAllDead()
	}
	return q.RequeueAllDead()
}
