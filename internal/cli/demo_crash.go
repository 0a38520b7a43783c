package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/walq/walq/queue"
)

// The crash step's settings.
const (
	crashProducers = 8               // the child's producer goroutines
	crashLeases    = 3               // messages the child's consumer leases and never acks
	crashAfter     = 1000            // acknowledged enqueues before the kill
	crashDeadline  = 5 * time.Second // kill the child by then whatever it reported
	crashTornBytes = 512             // the size of the entry whose write the demo tears
	crashTornHead  = 64              // the bytes of it the tear leaves
	childLifetime  = 20 * time.Second
)

// demoChildCmd is the child process of the demo's crash step. It is not
// meant to be run by hand.
var demoChildCmd = &command{
	name:   "demo-child",
	args:   "DIR",
	short:  "the demo's child process",
	long:   "Demo-child is run by 'walq demo': it enqueues until it is killed.",
	exits:  []int{exitOK, exitFailure},
	nargs:  [2]int{1, 1},
	hidden: true,
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		return func(e *env, args []string) error { return runDemoChild(e, args[0]) }
	},
}

// runDemoChild enqueues under SyncAlways from crashProducers goroutines
// and writes "enqueued ID" to stdout after each enqueue returns; a
// consumer leases crashLeases messages, writes "leased ID" for each, and
// never acks them. It runs until it is killed (or childLifetime passes, in
// case its parent died).
func runDemoChild(e *env, dir string) error {
	opts := &queue.Options{AckTimeout: time.Hour, SegmentSize: demoSegmentSize, Sync: queue.SyncAlways}
	q, err := queue.Open(dir, opts)
	if err != nil {
		return err
	}
	rep := &reporter{w: e.stdout}
	for g := range crashProducers {
		go produce(q, rep, g)
	}
	go consume(q, rep)
	time.Sleep(childLifetime)
	return errors.New("demo-child: not killed in time")
}

// reporter writes one line per event to the parent, one writer at a time.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

// report writes a line; if the parent is gone the child has no purpose.
func (r *reporter) report(event, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := fmt.Fprintf(r.w, "%s %s\n", event, id); err != nil {
		os.Exit(exitFailure)
	}
}

// produce enqueues crash-G-N for N = 1, 2, … and reports each.
func produce(q *queue.Queue, rep *reporter, g int) {
	for i := 1; ; i++ {
		id := fmt.Sprintf("crash-%d-%05d", g, i)
		if _, err := q.Enqueue(context.Background(), []byte("payload of "+id), queue.WithID(id)); err != nil {
			fmt.Fprintf(os.Stderr, "demo-child: enqueue: %v\n", err)
			os.Exit(exitFailure)
		}
		rep.report("enqueued", id)
	}
}

// consume leases crashLeases messages and sits on them.
func consume(q *queue.Queue, rep *reporter) {
	for range crashLeases {
		m, err := q.Dequeue(context.Background())
		if err != nil {
			fmt.Fprintf(os.Stderr, "demo-child: dequeue: %v\n", err)
			os.Exit(exitFailure)
		}
		rep.report("leased", m.ID)
	}
}

// childLog is what the parent heard from the child before it died.
type childLog struct {
	enqueued map[string]bool // acknowledged enqueues
	leased   map[string]bool // messages leased and never acked
	killedAt int             // acknowledged enqueues when the kill was sent
}

// crash runs step 3: the child, the kill, the recovery and the count.
func (d *demo) crash() error {
	d.title("3. A crash: kill -9 in the middle of a stream of enqueues")
	cl, err := d.runChild()
	if err != nil {
		return err
	}
	if err := d.tearTail(); err != nil {
		return err
	}
	// The drain needs no short ack timeout: a loaded machine must not
	// take back its leases before it acks them.
	opts := d.options()
	opts.AckTimeout = time.Minute
	q, err := queue.Open(d.dir, opts)
	if err != nil {
		return fmt.Errorf("reopen after the crash: %w", err)
	}
	d.sayRecovery(q.Recovery())
	found, err := d.drain(q)
	if cerr := q.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return d.count(cl, found)
}

// runChild starts the child, kills it once it has reported crashAfter
// acknowledged enqueues and its leases, and collects what it reported.
func (d *demo) runChild() (*childLog, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: find walq's executable: %w", err)
	}
	cmd := exec.Command(exe, "demo-child", d.dir)
	cmd.Stderr = d.e.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start child: %w", err)
	}
	d.say("child process %d: %d producers enqueue under SyncAlways and report each acknowledged id over a pipe;",
		cmd.Process.Pid, crashProducers)
	d.say("its consumer leases %d messages and never acks them", crashLeases)
	cl, err := d.listen(cmd, out)
	if werr := cmd.Wait(); err == nil && !killed(werr) {
		err = fmt.Errorf("demo: the child ended by itself: %v", werr)
	}
	return cl, err
}

// listen reads the child's reports until its pipe closes, sending SIGKILL
// once enough have come in, or at crashDeadline on a slow disk.
func (d *demo) listen(cmd *exec.Cmd, out io.Reader) (*childLog, error) {
	cl := &childLog{enqueued: map[string]bool{}, leased: map[string]bool{}}
	deadline := time.AfterFunc(crashDeadline, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		event, id, _ := strings.Cut(sc.Text(), " ")
		switch event {
		case "enqueued":
			cl.enqueued[id] = true
		case "leased":
			cl.leased[id] = true
		}
		if cl.killedAt == 0 && len(cl.enqueued) >= crashAfter && len(cl.leased) >= crashLeases {
			cl.killedAt = len(cl.enqueued)
			cmd.Process.Kill() // SIGKILL
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cl.killedAt == 0 {
		cl.killedAt = len(cl.enqueued)
		d.say("the disk is slow: sent SIGKILL at the %v deadline", crashDeadline)
	}
	if cl.killedAt == 0 {
		return nil, errors.New("demo: the child acknowledged no enqueue before the deadline")
	}
	d.say("sent SIGKILL after %d acknowledged enqueues; %d in all were reported before the pipe closed",
		cl.killedAt, len(cl.enqueued))
	return cl, nil
}

// killed reports whether the child's exit was the demo's SIGKILL.
func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// tearTail writes the first bytes of an entry after the last log
// segment's entries: what a power cut can leave of a write over the
// zeros the log keeps ahead of its entries (its first sector reached the
// disk, the rest did not). kill -9 alone leaves whole writes, since the
// kernel finishes them.
func (d *demo) tearTail() error {
	segs, err := segmentFiles(d.dir)
	if err != nil || len(segs) == 0 {
		return fmt.Errorf("demo: no log segments in %s: %v", d.dir, err)
	}
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(last, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	torn := binary.AppendUvarint(nil, crashTornBytes) // the frame of an entry of crashTornBytes
	torn = append(torn, bytes.Repeat([]byte{0xa5}, crashTornHead-len(torn))...)
	end := entriesEnd(b)
	_, err = f.WriteAt(torn, end)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	d.say("kill -9 leaves whole writes; to show the tail repair too, wrote the first %d bytes of a %d-byte entry at offset %d of %s, as a power cut can leave them",
		crashTornHead, crashTornBytes, end, filepath.Base(last))
	return err
}

// entriesEnd returns the offset after the whole entries that b, a log
// segment, starts with: each is a uvarint length and that many bytes
// (the zeros after them read as entries of length 0).
func entriesEnd(b []byte) int64 {
	off := 0
	for off < len(b) {
		n, k := binary.Uvarint(b[off:])
		if k <= 0 || n == 0 || uint64(len(b)-off-k) < n {
			break
		}
		off += k + int(n)
	}
	return int64(off)
}

// sayRecovery tells what the reopen did.
func (d *demo) sayRecovery(r queue.Recovery) {
	d.say("reopened the queue in %v:", r.Duration.Round(time.Microsecond))
	if t := r.Log.Torn; t != nil {
		d.say("  torn tail cut: %d bytes at offset %d of %s", t.Bytes, t.Offset, filepath.Base(t.Segment))
	} else {
		d.say("  torn tail: none")
	}
	d.say("  replayed %d log records after the snapshot at LSN %d", r.Replayed, r.SnapshotLSN)
	d.say("  the previous process closed cleanly: %v; %d of its leases are ready again", r.Clean, r.Requeued)
}

// drain leases every ready message in batches, acks each batch with one
// record, and returns their ids with their delivery counts. A batch that
// returns messages with an error (one it could not read) has them acked
// before the error is reported, so that they are not left leased to no one.
func (d *demo) drain(q *queue.Queue) (map[string]int, error) {
	found := map[string]int{}
	for q.Stats().Ready > 0 {
		ms, err := q.DequeueBatch(context.Background(), 1000)
		for _, m := range ms {
			found[m.ID] = m.Deliveries
		}
		if aerr := ackAll(q, ms); aerr != nil || err != nil {
			return nil, errors.Join(err, aerr)
		}
	}
	return found, nil
}

// ackAll acks ms in one batch: one record and one fsync.
func ackAll(q *queue.Queue, ms []*queue.Message) error {
	if len(ms) == 0 {
		return nil
	}
	rs := make([]queue.Receipt, len(ms))
	for i, m := range ms {
		rs[i] = m.Receipt
	}
	return q.AckBatch(rs...)
}

// count compares what the child acknowledged with what the queue held.
func (d *demo) count(cl *childLog, found map[string]int) error {
	var lost []string
	for id := range cl.enqueued {
		if _, ok := found[id]; !ok {
			lost = append(lost, id)
		}
	}
	again := 0
	for id := range cl.leased {
		if found[id] == 2 {
			again++
		}
	}
	d.say("drained %d messages: every one of the %d acknowledged enqueues is there: %v", len(found), len(cl.enqueued), len(lost) == 0)
	d.say("  %d more were on disk but the child died before it could report them (kept: at least once)", extra(cl, found))
	d.say("  the %d messages the child had leased came back on delivery 2: %d of %d", crashLeases, again, len(cl.leased))
	fmt.Fprintf(d.e.stdout, "\nlost: %d\n", len(lost))
	if len(lost) > 0 {
		slices.Sort(lost)
		return fmt.Errorf("demo: %d acknowledged messages lost, first %s", len(lost), lost[0])
	}
	return nil
}

// extra counts the messages found that the child had not reported.
func extra(cl *childLog, found map[string]int) int {
	n := 0
	for id := range found {
		if !cl.enqueued[id] {
			n++
		}
	}
	return n
}
