package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestKillLoop keeps one queue on one redis-server (appendonly yes,
// appendfsync always) through many cycles; in each, child processes
// produce and consume (options drawn per cycle: short leases that run
// out, MaxDeliveries 2 and the dead set, producer ids with a dedup window
// and enqueues sent again after an unknown outcome, delays, nacks,
// batches, calls whose context ends in flight) until the test kills
// (SIGKILL) the server, a child, or both, mid-traffic, restarts the
// server and goes on. Between cycles it lists the dead set and requeues
// some of it; every few cycles, and at the end, it drains the queue. The
// oracle (killOracle) holds the queue to what the children's journals say
// their calls returned: nothing that was enqueued lost, nothing delivered
// that was not enqueued, nothing delivered again after its ack returned,
// payloads intact, delivery counts rising, duplicates refused only for
// ids enqueued before, no Extend or ack refused with ErrLeaseLost before
// its lease's deadline, no delivery taken while an Extend holds its
// lease, and none while another delivery's lease (its dequeue plus the
// AckTimeout, unless a nack or dead-letter of it was sent sooner) holds.
//
// WALQ_REDISQ_KILL_CYCLES sets the number of cycles (default 4),
// WALQ_REDISQ_KILL_SEED the seed (default: from the clock; logged),
// WALQ_REDISQ_KILL_CHECKPOINT the cycles between drains (default 25).
func TestKillLoop(t *testing.T) {
	l := &killLoop{t: t, srv: redistest.Start(t), dir: t.TempDir(), o: newKillOracle()}
	logAOFCuts(t, l.srv)
	runKillCycles(t, 4, l, nil)
	require.NotZero(t, l.o.counts.Acked, "the children acked messages")
	require.NotZero(t, l.o.counts.ServerKills+l.o.counts.ChildKills, "something was killed")
}

// logAOFCuts logs, as the test ends (failed or not), how many of the
// server's restarts cut an open MULTI block off its AOF: the harness's
// repair of a Redis 7.0 loader bug (internal/redisserver/aof.go), which
// would otherwise replay half of one call's writes two starts later.
func logAOFCuts(t *testing.T, srv *redistest.Server) {
	t.Cleanup(func() { t.Logf("server restarts whose AOF repair cut an open MULTI block: %d", srv.AOFCuts()) })
}

// killLoopRun reads a kill loop's environment, logged: the cycles
// (WALQ_REDISQ_KILL_CYCLES, default def), the cycles between drains
// (WALQ_REDISQ_KILL_CHECKPOINT, default 25) and the seed
// (WALQ_REDISQ_KILL_SEED, default from the clock).
func killLoopRun(t *testing.T, def int) (cycles, every int, seed uint64) {
	t.Helper()
	cycles, every = envInt(t, "WALQ_REDISQ_KILL_CYCLES", def), envInt(t, "WALQ_REDISQ_KILL_CHECKPOINT", 25)
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("WALQ_REDISQ_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "WALQ_REDISQ_KILL_SEED")
		seed = v
	}
	t.Logf("seed %d (WALQ_REDISQ_KILL_SEED=%d replays it), %d cycles, a drain every %d", seed, seed, cycles, every)
	return cycles, every, seed
}

// killCycles is a kill loop as runKillCycles drives it.
type killCycles interface {
	// cycle runs cycle c, drawing its choices (and those of between)
	// from r.
	cycle(c int, r *rand.Rand)
	// between lists the dead after a cycle and requeues some.
	between()
	// drain empties the queues; the oracle then accounts for every
	// enqueue or publish that returned nil.
	drain()
	// verdict is the oracle's violations so far, its counts on one line,
	// and the first violations.
	verdict() (violations int, counts string, bad []string)
}

// runKillCycles runs a kill loop's cycles (killLoopRun: how many, def by
// default, and the seed): each with choices drawn from the seed and the
// cycle alone, then between; a drain every few cycles and after the last.
// Any violation fails the test at the cycle that showed it, with the seed
// that replays it. While starved (nil: never) says the cycles run left the
// test without something it must see, which a starved machine can do
// (leases too short for its latency, say), it runs one more cycle, def
// more at most, each drained. It returns the number of cycles run.
func runKillCycles(t *testing.T, def int, l killCycles, starved func() bool) int {
	t.Helper()
	cycles, every, seed := killLoopRun(t, def)
	c := 1
	for ; c <= cycles || (c <= cycles+def && starved != nil && starved()); c++ {
		if c > cycles {
			t.Logf("cycle %d: one more, the cycles so far left the test short of what it checks", c)
		}
		l.cycle(c, rand.New(rand.NewPCG(seed, uint64(c))))
		l.between()
		if c%every == 0 || c >= cycles {
			l.drain()
			_, counts, _ := l.verdict()
			t.Logf("drained after cycle %d: %s", c, counts)
		}
		n, counts, bad := l.verdict()
		require.Zero(t, n, "after cycle %d (seed %d): %s\n%v", c, seed, counts, bad)
	}
	_, counts, _ := l.verdict()
	t.Logf("%s", counts)
	return c - 1
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}

// killLoop is the state of TestKillLoop.
type killLoop struct {
	t   *testing.T
	srv *redistest.Server
	dir string // the children's journals and stderr
	o   *killOracle
	r   *rand.Rand // draws the cycle's choices
	// serverKills is when (Unix ns, before the SIGKILL) each kill of
	// the server was sent, in order.
	serverKills []int64
}

const killQueue = "killloop"

// pick returns one of the values, drawn from the loop's seed.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// ms returns a duration drawn between lo and hi milliseconds.
func (l *killLoop) ms(lo, hi int) time.Duration {
	return time.Duration(lo+l.r.IntN(hi-lo+1)) * time.Millisecond
}

// killChildProc is a running child.
type killChildProc struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	journal string
	stderr  string
}

// cycle runs one cycle: children with options drawn for it from r, killed
// in one of four ways, the server restarted, the journals read.
func (l *killLoop) cycle(c int, r *rand.Rand) {
	l.r = r
	cfg := killChildConfig{Addr: l.srv.Addr, Queue: killQueue, Cycle: c,
		AckTimeout:    pick(l.r, 100*time.Millisecond, 300*time.Millisecond, time.Second, 5*time.Second),
		MaxDeliveries: pick(l.r, 2, 2, 10, -1),
		Dedup:         pick(l.r, 0, 0, 200*time.Millisecond, 10*time.Second),
		Producers:     1 + l.r.IntN(2), Consumers: 1 + l.r.IntN(3),
		DelayPct: pick(l.r, 0, 20), NackPct: pick(l.r, 0, 10), AbandonPct: pick(l.r, 0, 5, 15),
		ShortPct: pick(l.r, 0, 20), BatchPct: pick(l.r, 0, 20), GeneratePct: pick(l.r, 0, 20),
		Sorted: pick(l.r, 0, 1)}
	kids := make([]*killChildProc, 2+l.r.IntN(2))
	way := pick(l.r, "server", "server-live", "child", "both")
	l.t.Logf("cycle %d: %d children, kill %s; %+v", c, len(kids), way, cfg)
	for i := range kids {
		cfg.Child, cfg.Seed = i, l.r.Uint64()>>1
		kids[i] = l.start(cfg)
	}
	from := len(l.serverKills)
	l.kill(way, kids)
	l.o.counts.Cycles++
	paths := make([]string, len(kids))
	for i, k := range kids {
		paths[i] = k.journal
	}
	require.NoError(l.t, l.o.readJournals(paths, cfg.AckTimeout, l.serverKills[from:]))
}

// kill lets the children run a while, then kills the server, children,
// or both, in one of four ways (way), restarting the server; it returns
// with every child dead and the server up.
func (l *killLoop) kill(way string, kids []*killChildProc) {
	time.Sleep(l.ms(300, 1200))
	switch way {
	case "server": // the server dies; the children see it down, then die
		l.killServer()
		time.Sleep(l.ms(0, 100))
		l.killChildren(kids...)
		l.srv.Restart()
	case "server-live": // the server dies and comes back under the children
		l.killServer()
		time.Sleep(l.ms(0, 300))
		l.srv.Restart()
		time.Sleep(l.ms(200, 800))
		l.killChildren(kids...)
	case "child": // a child dies; the others take over its leases
		l.killChildren(kids[0])
		time.Sleep(l.ms(100, 1500))
		l.killChildren(kids[1:]...)
	case "both": // a child and the server die together
		l.killChildren(kids[0])
		l.killServer()
		time.Sleep(l.ms(0, 200))
		l.srv.Restart()
		time.Sleep(l.ms(200, 800))
		l.killChildren(kids[1:]...)
	}
}

func (l *killLoop) start(cfg killChildConfig) *killChildProc {
	cfg.Journal = l.journalPath(cfg.Cycle, cfg.Child)
	return l.startChild(cfg.Journal, killLoopEnv+"="+cfg.encode())
}

// journalPath is where the child of a cycle writes its journal.
func (l *killLoop) journalPath(cycle, child int) string {
	return filepath.Join(l.dir, fmt.Sprintf("c%d.k%d.journal", cycle, child))
}

// startChild starts a child writing journal: the test binary again, with
// env (the variable that makes it a child, and its settings) and GORACE
// set, its stderr beside its journal.
func (l *killLoop) startChild(journal, env string) *killChildProc {
	k := &killChildProc{journal: journal, stderr: strings.TrimSuffix(journal, ".journal") + ".stderr"}
	errf, err := os.Create(k.stderr)
	require.NoError(l.t, err)
	defer errf.Close()
	k.cmd = exec.Command(os.Args[0], "-test.run=^$")
	// Under -race a data race in a child ends it (and so fails the
	// test, as a child that exited by itself) rather than going to a
	// stderr file nobody reads.
	k.cmd.Env = append(os.Environ(), env,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" halt_on_error=1"))
	k.cmd.Stderr = errf
	k.stdin, err = k.cmd.StdinPipe()
	require.NoError(l.t, err)
	require.NoError(l.t, k.cmd.Start())
	l.t.Cleanup(func() { _ = k.cmd.Process.Kill(); _ = k.stdin.Close() })
	return k
}

func (l *killLoop) killServer() {
	l.serverKills = append(l.serverKills, time.Now().UnixNano())
	l.srv.Kill()
	l.o.counts.ServerKills++
}

// killChildren kills the children (SIGKILL) and waits for them; a child
// that had exited by itself fails the test with what it wrote to stderr.
func (l *killLoop) killChildren(kids ...*killChildProc) {
	for _, k := range kids {
		_ = k.cmd.Process.Signal(syscall.SIGKILL)
		_ = k.cmd.Wait()
		if ws, ok := k.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			msg, _ := os.ReadFile(k.stderr)
			l.t.Fatalf("a child exited by itself (%v):\n%s", k.cmd.ProcessState, msg)
		}
		_ = k.stdin.Close()
		l.o.counts.ChildKills++
	}
}

// open opens a handle of the parent's on the queue, on a client of its
// own; done closes both.
func (l *killLoop) open(o *redisq.Options) (q *redisq.Queue, done func()) {
	rdb := redis.NewClient(&redis.Options{Addr: l.srv.Addr, MaxRetries: -1})
	q, err := redisq.Open(context.Background(), rdb, killQueue, o)
	require.NoError(l.t, err)
	return q, func() {
		require.NoError(l.t, q.Close())
		require.NoError(l.t, rdb.Close())
	}
}

// between is deadSet, as runKillCycles calls it.
func (l *killLoop) between() { l.deadSet() }

// verdict is the oracle's violations, counts and first violations.
func (l *killLoop) verdict() (int, string, []string) {
	return l.o.counts.violations(), l.o.counts.String(), l.o.bad
}

// deadSet lists the dead set (each letter's payload intact, its token
// enqueued and not acked) and requeues some of it, recording when.
func (l *killLoop) deadSet() {
	q, done := l.open(&redisq.Options{ManualRequeue: true})
	defer done()
	letters, err := q.DeadLetters(0, 0)
	require.NoError(l.t, err)
	requeue := l.r.IntN(3) // 0: none, 1: by id, half of them, 2: all
	var toks []string
	for _, d := range letters {
		tok := l.o.held(d.Payload, d.ID, "dead")
		l.o.counts.Dead++
		if tok == "" || requeue == 0 || requeue == 1 && l.r.IntN(2) == 0 {
			continue
		}
		if requeue == 1 {
			require.NoError(l.t, q.RequeueDead(d.ID))
		}
		toks = append(toks, tok)
	}
	if requeue == 2 {
		n, err := q.RequeueAllDead()
		require.NoError(l.t, err)
		require.Equal(l.t, len(letters), n, "RequeueAllDead requeued every letter listed")
	}
	toks = append(toks, l.deadValues(requeue)...)
	now := time.Now().UnixNano()
	for _, tok := range toks {
		k := l.o.tok(tok)
		k.requeued = append(k.requeued, now)
		l.o.counts.Requeued++
	}
}

// deadValues lists the sorted queue's dead values and requeues some of
// them (requeue as for deadSet), returning the tokens requeued.
func (l *killLoop) deadValues(requeue int) []string {
	s, done := l.openSorted(nil)
	defer done()
	values, err := s.DeadValues(0, 0)
	require.NoError(l.t, err)
	var toks []string
	for _, d := range values {
		tok := l.o.held(d.Payload, d.Key, "dead value")
		l.o.counts.Dead++
		if tok == "" || requeue == 0 || requeue == 1 && l.r.IntN(2) == 0 {
			continue
		}
		if requeue == 1 {
			require.NoError(l.t, s.RequeueDead(d.Seq))
		}
		toks = append(toks, tok)
	}
	if requeue == 2 {
		n, err := s.RequeueAllDead()
		require.NoError(l.t, err)
		require.Equal(l.t, len(values), n, "RequeueAllDead requeued every value listed")
	}
	return toks
}

// openSorted opens a handle of the parent's on the sorted queue (with a
// clock an hour ahead when shifted), on a client of its own; done closes
// both.
func (l *killLoop) openSorted(clock queue.Clock) (s *redisq.Sorted[int64], done func()) {
	rdb := redis.NewClient(&redis.Options{Addr: l.srv.Addr, MaxRetries: -1})
	o := redisq.Options{ManualRequeue: true}
	if clock != nil {
		o.Clock, o.MaxDeliveries = clock, -1
	}
	s, err := redisq.OpenSorted[int64](context.Background(), rdb, killSortedQueue,
		&redisq.SortedOptions{Options: o, SingleFlight: true})
	require.NoError(l.t, err)
	return s, func() {
		require.NoError(l.t, s.Close())
		require.NoError(l.t, rdb.Close())
	}
}

// drainSorted drains the sorted queue as drain does the ack queue,
// adding what it held to held.
func (l *killLoop) drainSorted(held map[string]bool) {
	s, done := l.openSorted(&shiftedClock{d: time.Hour})
	defer done()
	_, err := s.RequeueExpired()
	require.NoError(l.t, err)
	for {
		bs, err := s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(l.t, err)
		for _, b := range bs {
			for _, v := range b.Values {
				if tok := l.o.held(v.Payload, b.Key, "pulled at the drain"); tok != "" {
					require.False(l.t, held[tok], "%s drained twice", tok)
					held[tok] = true
				}
				l.o.counts.Drained++
			}
			require.NoError(l.t, b.Ack())
		}
	}
	values, err := s.DeadValues(0, 0)
	require.NoError(l.t, err)
	for _, d := range values {
		if tok := l.o.held(d.Payload, d.Key, "dead value at the drain"); tok != "" {
			held[tok] = true
		}
	}
	_, err = s.PurgeAllDead()
	require.NoError(l.t, err)
	st, err := s.StatsContext(context.Background())
	require.NoError(l.t, err)
	require.Zero(l.t, st.Ready+st.InFlight+st.Delayed+st.Dead, "the drained sorted queue is empty: %+v", st)
}

// held takes in a message the queue holds (dead, or drained): its payload
// must be intact. It returns its token, "" when the payload is not one
// enqueued.
func (o *killOracle) held(payload []byte, id, how string) string {
	tok, intact := killToken(payload)
	if !intact {
		o.violate(&o.counts.Payload, "%s message %s: payload %q is not one enqueued", how, id, payload)
		return ""
	}
	o.present(tok, how)
	return tok
}

// drain empties the queue: with a clock an hour ahead every lease has run
// out and every delay is due, so a drain reaches every message; the dead
// set is listed and purged; then the oracle checks that every enqueue that
// returned nil is accounted for.
func (l *killLoop) drain() {
	q, done := l.open(&redisq.Options{Clock: &shiftedClock{d: time.Hour}, ManualRequeue: true, MaxDeliveries: -1})
	defer done()
	_, err := q.RequeueExpired()
	require.NoError(l.t, err)
	held := map[string]bool{}
	for {
		m, err := q.TryDequeue()
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(l.t, err)
		if tok := l.o.held(m.Payload, m.ID, "drained"); tok != "" {
			require.False(l.t, held[tok], "%s drained twice", tok)
			held[tok] = true
		}
		l.o.counts.Drained++
		require.NoError(l.t, m.Ack())
	}
	letters, err := q.DeadLetters(0, 0)
	require.NoError(l.t, err)
	for _, d := range letters {
		if tok := l.o.held(d.Payload, d.ID, "dead at the drain"); tok != "" {
			held[tok] = true
		}
	}
	_, err = q.PurgeAllDead()
	require.NoError(l.t, err)
	s, err := q.StatsContext(context.Background())
	require.NoError(l.t, err)
	require.Zero(l.t, s.Ready+s.InFlight+s.Delayed+s.Dead, "the drained queue is empty: %+v", s)
	l.drainSorted(held)
	l.o.checkpoint(held)
}
