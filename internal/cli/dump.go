package cli

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"
	"unicode/utf8"

	"github.com/walq/walq/internal/twin"
	"github.com/walq/walq/queue"
)

var dumpCmd = &command{
	name:  "dump",
	args:  "[--from LSN] [--to LSN] [--limit N] [--payload=false] DIR",
	short: "every log record as one JSON line",
	long: `Dump prints the records of the log in DIR, oldest first, one JSON object
a line: lsn, op (enqueue, lease, ack, nack, extend, expire, dead,
requeue-dead, purge, move, close; for sorted and windowed queues publish,
pull, the batch records and value-dead), seq (the message or sorted value), lease
(the delivery or sorted batch), values (the seqs of the values a
batch-ack or batch-dead names), id, producer_id (true when the producer
gave the id), key and sort (a publish's message key and sort key), size
(encoded record bytes), at, due, reason, headers, and for a record that
holds a payload its length (payload_bytes) and, unless --payload=false,
the payload. A payload that is printable UTF-8 is shown as text
("payload_encoding": "text"), any other as base64 ("base64").
` + base64Note + `

Dump writes nothing. A queue that another process has open is read as
that process has written it so far. Records before the last snapshot may
be gone: the log is truncated at segment boundaries.`,
	example: `walq dump /var/lib/app/jobs | head
walq dump --from 1200 --to 1300 --payload=false /var/lib/app/jobs
walq dump /var/lib/app/jobs > jobs.jsonl   # progress on stderr`,
	exits:   []int{exitOK, exitFailure, exitCorrupt},
	nargs:   [2]int{1, 1},
	dirOnly: true,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		var o dumpOptions
		fs.Uint64Var(&o.from, "from", 0, "first `LSN` to print")
		fs.Uint64Var(&o.to, "to", 0, "last `LSN` to print (0: to the end)")
		fs.IntVar(&o.limit, "limit", 0, "print at most `N` records (0: no limit)")
		fs.BoolVar(&o.payload, "payload", true, "include payloads")
		return func(e *env, args []string) error { return runDump(e, args[0], o) }
	},
}

type dumpOptions struct {
	from, to uint64 // LSN range, inclusive; to 0 means the end
	limit    int    // records at most; 0 means no limit
	payload  bool   // print payloads
}

// dumpRecord is one line of dump.
type dumpRecord struct {
	LSN        uint64            `json:"lsn"`
	Op         string            `json:"op"`
	Seq        uint64            `json:"seq,omitempty"`
	Lease      uint64            `json:"lease,omitempty"`
	ID         string            `json:"id,omitempty"`
	IDBase64   string            `json:"id_base64,omitempty"`
	Key        string            `json:"key,omitempty"`
	KeyBase64  string            `json:"key_base64,omitempty"`
	Sort       any               `json:"sort,omitempty"`
	SortBase64 string            `json:"sort_base64,omitempty"`
	ProducerID bool              `json:"producer_id,omitempty"`
	Size       int               `json:"size"`
	At         string            `json:"at,omitempty"`
	Due        string            `json:"due,omitempty"`
	Reason     string            `json:"reason,omitempty"`
	Reason64   string            `json:"reason_base64,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Headers64  map[string]string `json:"headers_base64,omitempty"`
	Values     []uint64          `json:"values,omitempty"` // batch-ack, batch-dead: the Seqs of the batch's values
	PayloadLen *int              `json:"payload_bytes,omitempty"`
	Payload    *string           `json:"payload,omitempty"`
	Encoding   string            `json:"payload_encoding,omitempty"`
}

// errStopDump ends the walk through the log early.
var errStopDump = errors.New("stop dump")

func runDump(e *env, dir string, o dumpOptions) error {
	if err := checkQueueDir(dir); err != nil {
		return err
	}
	if o.to != 0 && o.to < o.from {
		return usagef("--to %d is before --from %d", o.to, o.from)
	}
	w := bufio.NewWriter(e.stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var bar *progress
	if !e.outTTY {
		bar = e.bytesBar(logBytes(dir), "dump")
	}
	n, first := 0, uint64(0)
	err := queue.ReadLog(dir, o.from, func(r queue.Record) error {
		if first == 0 {
			first = r.LSN
		}
		if (o.to != 0 && r.LSN > o.to) || (o.limit > 0 && n >= o.limit) {
			return errStopDump
		}
		n++
		bar.add(int64(r.Size))
		return enc.Encode(toDump(r, o.payload))
	})
	bar.done()
	if errors.Is(err, errStopDump) {
		err = nil
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err == nil && first > o.from && o.from > 0 {
		fmt.Fprintf(e.stderr, "walq: note: the log starts at LSN %d; the records before it were compacted into the snapshot\n", first)
	}
	return err
}

// toDump converts a record to its JSON line.
func toDump(r queue.Record, payload bool) dumpRecord {
	d := dumpRecord{LSN: r.LSN, Op: r.Op, Seq: r.Seq, Lease: r.Lease, ProducerID: r.ProducerID,
		Sort: sortJSON(r.Sort), Size: r.Size, At: jsonTime(r.At), Due: jsonTime(r.Due), Values: r.Values}
	if s, ok := r.Sort.(string); ok && !utf8.ValidString(s) {
		_, d.SortBase64 = twin.Split(s)
		d.Sort = nil // left out, as an id is
	}
	d.Reason, d.Reason64 = twin.Split(r.Reason)
	d.ID, d.IDBase64 = twin.Split(r.ID)
	d.Key, d.KeyBase64 = twin.Split(r.Key)
	d.Headers, d.Headers64 = twin.SplitHeaders(r.Headers)
	if r.Op != "enqueue" && r.Op != "move" && r.Op != "move-dead" && r.Op != "publish" {
		return d
	}
	n := len(r.Payload)
	d.PayloadLen = &n
	if payload {
		s, enc := payloadText(r.Payload)
		d.Payload, d.Encoding = &s, enc
	}
	return d
}

// sortJSON is a sort key as dump prints it: numbers and strings as they
// are, times in RFC 3339, raw bytes (a directory that does not record its
// sort key type) in hex.
func sortJSON(s any) any {
	switch v := s.(type) {
	case time.Time:
		return jsonTime(v)
	case []byte:
		return hex.EncodeToString(v)
	}
	return s
}

// payloadText returns b as text when it is printable UTF-8, or else as
// base64, with the name of the encoding used.
func payloadText(b []byte) (string, string) {
	if enc := twin.Encoding(b); enc == "base64" {
		return base64.StdEncoding.EncodeToString(b), enc
	}
	return string(b), "text"
}

// logBytes returns the bytes of the log segment files in dir, for
// progress; 0 when they cannot be listed.
func logBytes(dir string) int64 {
	segs, err := segmentFiles(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, s := range segs {
		if fi, err := os.Stat(s); err == nil {
			n += fi.Size()
		}
	}
	return n
}
