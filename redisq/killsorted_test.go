package redisq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestKillLoopSorted is TestKillLoop for the sorted and windowed queues:
// one sorted queue (int64 sort keys) and one windowed queue on one
// redis-server (appendonly yes, appendfsync always) go through cycles in
// which child processes publish and pull (options drawn per cycle:
// SingleFlight on each queue, switched between cycles as the docs say,
// with no handle open; short leases that run out, a MaxDeliveries of
// each child's own (1, 2, 10 or none), so that values one child gave back
// reach another's limit at its pull, and the dead set; key0's batches
// given back or left to run out often; windows of 50 ms to 500 ms, nacks
// with delays, dead-letters, leases extended before a settle or before
// running out, batches held a while (past their first deadline, after an
// Extend) while their puller pulls on, calls whose context ends in
// flight) until the test kills
// (SIGKILL) the server, a child, or both, mid-traffic, restarts the server
// and goes on, with the ack loop's four ways of killing. Between cycles it
// lists the dead values and requeues some; every few cycles, and at the
// end, it drains both queues. The oracle (sortedOracle) holds the queues
// to what the children's journals say their calls returned: nothing that
// was published lost, nothing pulled that was not published, nothing
// pulled again after its ack returned, payloads intact, one key per batch
// with the published sort keys in order, batches of a Pull in their keys'
// order, a single-flight key (and any value) leased to one batch at a
// time, a lease held until its settle or the deadline an Extend set, no
// key pulled before its window closed or its nack's delay passed (within
// sortedKillMargin), delivery counts rising, no settle or Extend refused
// with ErrLeaseLost before its lease's deadline.
//
// WALQ_REDISQ_KILL_CYCLES sets the number of cycles (default 3),
// WALQ_REDISQ_KILL_SEED the seed (default: from the clock; logged),
// WALQ_REDISQ_KILL_CHECKPOINT the cycles between drains (default 25), as
// for TestKillLoop; WALQ_REDISQ_KILL_KEEP a directory where a failed run
// leaves a copy of the server's files and the children's journals.
func TestKillLoopSorted(t *testing.T) {
	l := &sortedKillLoop{k: &killLoop{t: t, srv: redistest.Start(t), dir: t.TempDir(), o: newKillOracle()},
		o: newSortedOracle()}
	keepOnFailure(t, "WALQ_REDISQ_KILL_KEEP", l.k.srv.Dir, l.k.dir)
	logAOFCuts(t, l.k.srv)
	c := &l.o.counts
	// A machine too loaded for a cycle's shortest leases can see every
	// Extend of a run come too late, refused: then more cycles, until one
	// extends a lease (an Extend that never works still fails the test).
	cycles := runKillCycles(t, 3, l, func() bool { return c.Extended == 0 })
	require.NotZero(t, c.Acked, "the children acked batches")
	require.NotZero(t, c.ServerKills+c.ChildKills, "something was killed")
	require.NotZero(t, c.EarlyChecks, "windowed batches were checked against their windows")
	if cycles >= 3 {
		require.NotZero(t, c.Extended, "leases were extended")
	}
}

// sortedKillLoop is the state of TestKillLoopSorted: the ack loop's
// server and children (k, whose oracle only counts kills) and its own
// oracle.
type sortedKillLoop struct {
	k      *killLoop
	o      *sortedOracle
	single map[string]bool // the queues ("s", "w") with SingleFlight this cycle, as recorded in them
}

// cycle runs one cycle: children with options drawn for it from r,
// killed in one of the ack loop's four ways, the server restarted, the
// journals read.
func (l *sortedKillLoop) cycle(c int, r *rand.Rand) {
	l.k.r = r
	cfg := sortedKillConfig{Addr: l.k.srv.Addr, Cycle: c,
		AckTimeout: pick(r, 100*time.Millisecond, 300*time.Millisecond, time.Second, 5*time.Second),
		Window:     pick(r, 50*time.Millisecond, 200*time.Millisecond, 500*time.Millisecond),
		Publishers: 1 + r.IntN(2), Pullers: 2 + r.IntN(3),
		NackPct: pick(r, 0, 10, 20), AbandonPct: pick(r, 0, 5, 15), DeadPct: pick(r, 0, 2),
		ShortPct: pick(r, 0, 20), SortRange: pick(r, 5, 50, 1000), KeyRange: pick(r, 2, 3, 8, 30),
		ExtendPct: pick(r, 20, 40), DoomPct: pick(r, 30, 60), HoldPct: pick(r, 20, 50),
		SortedSingle: r.IntN(2) == 0, WindowedSingle: r.IntN(2) == 0}
	l.setSingle(cfg.SortedSingle, cfg.WindowedSingle)
	kids := make([]*killChildProc, 2+r.IntN(2))
	way := pick(r, "server", "server-live", "child", "both")
	l.k.t.Logf("cycle %d: %d children, kill %s; %+v (MaxDeliveries: each child's own, below)", c, len(kids), way, cfg)
	js := make([]sortedJournal, len(kids))
	for i := range kids {
		// Each child its own limit: a value one child gave back with
		// more deliveries than another's limit goes dead at that one's
		// pull (killPastLimit, scripts/sorted.lua).
		// Child 0 has no limit or a high one, child 1 a low one, so that
		// every cycle has both.
		cfg.Child, cfg.Seed, cfg.MaxDeliveries = i, r.Uint64()>>1, pick(r, 1, 2, 2, 10, -1)
		if i < 2 {
			cfg.MaxDeliveries = [][]int{{10, -1}, {1, 2}}[i][r.IntN(2)]
		}
		cfg.Journal = l.k.journalPath(c, i)
		env, err := json.Marshal(cfg)
		require.NoError(l.k.t, err)
		kids[i] = l.k.startChild(cfg.Journal, sortedKillEnv+"="+string(env))
		js[i] = sortedJournal{path: cfg.Journal, maxDeliveries: cfg.MaxDeliveries, ackTimeout: cfg.AckTimeout}
		l.k.t.Logf("cycle %d child %d: MaxDeliveries %d", c, i, cfg.MaxDeliveries)
	}
	from := len(l.k.serverKills)
	l.k.kill(way, kids)
	l.o.counts.Cycles++
	l.o.counts.ServerKills, l.o.counts.ChildKills = l.k.o.counts.ServerKills, l.k.o.counts.ChildKills
	require.NoError(l.k.t, l.o.readJournals(js, l.single, l.k.serverKills[from:]))
}

// setSingle records each queue's SingleFlight for the cycle, while no
// handle is open (the children of the cycle before are dead, the
// parent's handles closed), as the docs tell an operator to change it:
// the field "single" of the queue's stats hash, 1 or 0.
func (l *sortedKillLoop) setSingle(sorted, windowed bool) {
	l.single = map[string]bool{"s": sorted, "w": windowed}
	for q, name := range map[string]string{"s": killSortedLoopQueue, "w": killWindowedLoopQueue} {
		v := "0"
		if l.single[q] {
			v = "1"
		}
		require.NoError(l.k.t, l.k.srv.Client().HSet(context.Background(), "walq:{"+name+"}:s:stats", "single", v).Err())
	}
}

// open opens the parent's handles on both queues (with clock, when not
// nil, and then no MaxDeliveries), on a client of their own; done closes
// them.
func (l *sortedKillLoop) open(clock queue.Clock) (s *redisq.Sorted[int64], w *redisq.Windowed, done func()) {
	t := l.k.t
	rdb := redis.NewClient(&redis.Options{Addr: l.k.srv.Addr, MaxRetries: -1})
	o := redisq.Options{ManualRequeue: true}
	if clock != nil {
		o.Clock, o.MaxDeliveries = clock, -1
	}
	s, err := redisq.OpenSorted[int64](context.Background(), rdb, killSortedLoopQueue,
		&redisq.SortedOptions{Options: o, SingleFlight: l.single["s"]})
	require.NoError(t, err)
	w, err = redisq.OpenWindowed(context.Background(), rdb, killWindowedLoopQueue,
		&redisq.WindowOptions{SortedOptions: redisq.SortedOptions{Options: o, SingleFlight: l.single["w"]}, Window: time.Minute})
	require.NoError(t, err)
	return s, w, func() {
		require.NoError(t, s.Close())
		require.NoError(t, w.Close())
		require.NoError(t, rdb.Close())
	}
}

// keepOnFailure copies dirs (the server's files, the children's
// journals) under the directory that the environment variable env names,
// when set, if the test fails: its temporary directories are removed as
// it ends, and a failure that shows once in many runs is read from them.
// It runs before the server is killed (cleanups run last first), so the
// copy of its AOF holds every write it acknowledged.
func keepOnFailure(t *testing.T, env string, dirs ...string) {
	to := os.Getenv(env)
	if to == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(to, fmt.Sprintf("%s-%d", t.Name(), os.Getpid()))
		for i, d := range dirs {
			out, err := exec.Command("cp", "-a", d, fmt.Sprintf("%s-%d", dst, i)).CombinedOutput()
			if err != nil {
				t.Logf("%s: keep %s: %v: %s", env, d, err, out)
				continue
			}
			t.Logf("%s: %s kept as %s-%d", env, d, dst, i)
		}
	})
}

// between is deadValues, as runKillCycles calls it.
func (l *sortedKillLoop) between() { l.deadValues() }

// verdict is the oracle's violations, counts and first violations.
func (l *sortedKillLoop) verdict() (int, string, []string) {
	return l.o.counts.violations(), l.o.counts.String(), l.o.bad
}

// deadValues lists both queues' dead values (each one's payload intact,
// its key the published one, no ack of it returned) and requeues some of
// them, recording when.
func (l *sortedKillLoop) deadValues() {
	s, w, done := l.open(nil)
	defer done()
	requeue := l.k.r.IntN(3) // 0: none, 1: by seq, half of them, 2: all
	toks := deadKill(l, "s", requeue, s)
	toks = append(toks, deadKill(l, "w", requeue, w.Sorted)...)
	now := time.Now().UnixNano()
	for _, tok := range toks {
		k := l.o.tok(tok)
		k.requeued = append(k.requeued, now)
		l.o.counts.Requeued++
	}
}

// deadKill lists queue q's dead values and requeues some (requeue as for
// deadValues), returning the tokens requeued.
func deadKill[K queue.SortKey](l *sortedKillLoop, q string, requeue int, s *redisq.Sorted[K]) []string {
	t := l.k.t
	values, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	var toks []string
	for _, d := range values {
		tok := l.o.heldWhy(q, d.Payload, d.Key, "dead", d.Reason)
		l.o.counts.Dead++
		if strings.HasSuffix(d.Reason, "; not delivered again") { // killPastLimit's reason
			l.o.counts.DeadAtPull++
		}
		if tok == "" || requeue == 0 || requeue == 1 && l.k.r.IntN(2) == 0 {
			continue
		}
		if requeue == 1 {
			require.NoError(t, s.RequeueDead(d.Seq))
		}
		toks = append(toks, tok)
	}
	if requeue == 2 {
		n, err := s.RequeueAllDead()
		require.NoError(t, err)
		require.Equal(t, len(values), n, "RequeueAllDead requeued every value listed")
	}
	return toks
}

// drain empties both queues: with a clock an hour ahead every lease has
// run out, every hold and window has ended, so a drain reaches every
// value; the dead sets are listed and purged; then the oracle checks that
// every publish that returned nil is accounted for.
func (l *sortedKillLoop) drain() {
	s, w, done := l.open(&shiftedClock{d: time.Hour})
	defer done()
	held := map[string]bool{}
	drainKill(l, "s", s, held)
	drainKill(l, "w", w.Sorted, held)
	l.o.checkpoint(held)
}

// drainKill drains queue q, adding what it held to held.
func drainKill[K queue.SortKey](l *sortedKillLoop, q string, s *redisq.Sorted[K], held map[string]bool) {
	t := l.k.t
	_, err := s.RequeueExpired()
	require.NoError(t, err)
	for {
		bs, err := s.TryPull(100)
		if errors.Is(err, queue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		for _, b := range bs {
			for _, v := range b.Values {
				if tok := l.o.held(q, v.Payload, b.Key, "drained"); tok != "" {
					require.False(t, held[tok], "%s drained twice", tok)
					held[tok] = true
				}
				l.o.counts.Drained++
			}
			require.NoError(t, b.Ack())
		}
	}
	values, err := s.DeadValues(0, 0)
	require.NoError(t, err)
	for _, d := range values {
		if tok := l.o.heldWhy(q, d.Payload, d.Key, "dead at the drain", d.Reason); tok != "" {
			held[tok] = true
		}
	}
	_, err = s.PurgeAllDead()
	require.NoError(t, err)
	st, err := s.StatsContext(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.SortedPending+st.SortedBatches+st.SortedDead, "the drained %s queue is empty: %+v", q, st)
}
