package redisq

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gatedRun is a coalescer's run whose calls each report their batch on
// started and then wait until their first item is released; each item's
// error names it.
type gatedRun struct {
	started chan []int
	release map[int]chan struct{}
}

func newGatedRun(items int) *gatedRun {
	g := &gatedRun{started: make(chan []int, items), release: map[int]chan struct{}{}}
	for i := range items {
		g.release[i] = make(chan struct{})
	}
	return g
}

func (g *gatedRun) run(vs []int) []error {
	g.started <- slices.Clone(vs)
	<-g.release[vs[0]]
	errs := make([]error, len(vs))
	for i, v := range vs {
		errs[i] = fmt.Errorf("item %d", v)
	}
	return errs
}

// receive returns what ch yields, failing the test if nothing comes: a
// coalescer that makes a caller wait for others' calls hangs here.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10s", what)
		panic("unreachable")
	}
}

// queued waits until n callers queue in c.
func queued(t *testing.T, c *coalescer[int], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c.mu.Lock()
		got := len(c.pending)
		c.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("%d callers never queued", n)
}

// TestCoalescerHandsOnQueuedBatch: while a call runs, callers queue; the
// caller whose call returns hands what queued, in the order it came, to
// the oldest queued caller and returns its own result, without waiting
// for that batch to run.
func TestCoalescerHandsOnQueuedBatch(t *testing.T) {
	var c coalescer[int]
	const queuing = 3
	g := newGatedRun(1 + queuing)
	type result struct {
		v   int
		err error
	}
	results := make(chan result, 1+queuing)
	call := func(v int) { results <- result{v, c.do(v, g.run)} }
	go call(0)
	receive(t, g.started, "call in flight")
	for i := 1; i <= queuing; i++ {
		go call(i)
		queued(t, &c, i)
	}

	close(g.release[0])
	if r := receive(t, results, "return of the first call's caller"); r.v != 0 || r.err == nil || r.err.Error() != "item 0" {
		t.Fatalf("first to return: item %d with %v, want item 0 with its own error", r.v, r.err)
	}
	want := []int{1, 2, 3}
	if got := receive(t, g.started, "batch of the queued callers"); !slices.Equal(got, want) {
		t.Fatalf("queued callers ran as %v, want one call of %v", got, want)
	}

	close(g.release[1])
	for range queuing {
		r := receive(t, results, "return")
		if want := fmt.Errorf("item %d", r.v); r.err == nil || r.err.Error() != want.Error() {
			t.Fatalf("caller of item %d got %v, want %v", r.v, r.err, want)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy || len(c.pending) != 0 {
		t.Fatalf("after every call: busy %v, %d queued, want idle", c.busy, len(c.pending))
	}
}

// TestCoalescerPanicReachesEveryCaller: a call of run that panics panics
// in every caller whose item it carried, as it would have alone, and the
// callers after it are served; none waits for good on a call that will
// never return.
func TestCoalescerPanicReachesEveryCaller(t *testing.T) {
	var c coalescer[int]
	g := newGatedRun(4)
	run := func(vs []int) []error {
		if vs[0] == 1 {
			panic("run failed")
		}
		return g.run(vs)
	}
	results := make(chan string, 4)
	call := func(v int) {
		defer func() {
			if p := recover(); p != nil {
				results <- fmt.Sprintf("item %d: panic %v", v, p)
			}
		}()
		results <- fmt.Sprintf("item %d: %v", v, c.do(v, run))
	}
	go call(0)
	receive(t, g.started, "call in flight")
	go call(1)
	queued(t, &c, 1)
	go call(2)
	queued(t, &c, 2)
	close(g.release[0])

	var got []string
	for range 3 {
		select {
		case r := <-results:
			got = append(got, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("callers returned %q, and no other after 10s", got)
		}
	}
	slices.Sort(got)
	want := []string{"item 0: item 0", "item 1: panic run failed", "item 2: panic run failed"}
	if !slices.Equal(got, want) {
		t.Fatalf("callers got %q, want %q", got, want)
	}
	close(g.release[3])
	go call(3)
	if r := receive(t, results, "return of a call after the panic"); r != "item 3: item 3" {
		t.Fatalf("call after the panic: %q, want %q", r, "item 3: item 3")
	}
}

// TestCoalescerHandsOnAtMostMaxCoalesce: callers queued beyond
// maxCoalesce go out in the next call, in the order they came.
func TestCoalescerHandsOnAtMostMaxCoalesce(t *testing.T) {
	var c coalescer[int]
	const queuing = maxCoalesce + 2
	g := newGatedRun(1 + queuing)
	results := make(chan error, 1+queuing)
	go func() { results <- c.do(0, g.run) }()
	receive(t, g.started, "call in flight")
	for i := 1; i <= queuing; i++ {
		go func() { results <- c.do(i, g.run) }()
		queued(t, &c, i)
	}
	for _, ch := range g.release {
		close(ch)
	}
	first, second := make([]int, maxCoalesce), []int{maxCoalesce + 1, maxCoalesce + 2}
	for i := range first {
		first[i] = i + 1
	}
	for _, want := range [][]int{first, second} {
		if got := receive(t, g.started, "call of the queued callers"); !slices.Equal(got, want) {
			t.Fatalf("queued callers ran as %v, want %v", got, want)
		}
	}
	for range 1 + queuing {
		receive(t, results, "return")
	}
}

// TestCoalescerServesEachCallerOnceInOrder: goroutines that each call in
// sequence get one result per call, their own; their items reach run in
// the order each goroutine made its calls, one call of run at a time.
func TestCoalescerServesEachCallerOnceInOrder(t *testing.T) {
	var c coalescer[[2]int] // goroutine, its call number
	const goroutines, calls = 8, 300
	var mu sync.Mutex // guards ran and inFlight
	ran := make([][]int, goroutines)
	inFlight := 0
	run := func(vs [][2]int) []error {
		mu.Lock()
		inFlight++
		if inFlight > 1 || len(vs) > maxCoalesce {
			t.Errorf("%d calls of run at once, %d items", inFlight, len(vs))
		}
		for _, v := range vs {
			ran[v[0]] = append(ran[v[0]], v[1])
		}
		mu.Unlock()
		time.Sleep(50 * time.Microsecond) // let callers queue
		errs := make([]error, len(vs))
		for i, v := range vs {
			errs[i] = fmt.Errorf("%d/%d", v[0], v[1])
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return errs
	}
	var wg sync.WaitGroup
	for gr := range goroutines {
		wg.Go(func() {
			for k := range calls {
				if err := c.do([2]int{gr, k}, run); err == nil || err.Error() != fmt.Sprintf("%d/%d", gr, k) {
					t.Errorf("call %d/%d got %v", gr, k, err)
				}
			}
		})
	}
	wg.Wait()
	for gr, got := range ran {
		if len(got) != calls || !slices.IsSorted(got) {
			t.Errorf("goroutine %d: items ran as %v, want 0..%d once each in order", gr, got, calls-1)
		}
	}
}

// TestCoalescerGathersReadyCallers: a caller that finds the coalescer
// idle yields once before its call, and callers ready to run by then go
// in that call, as those woken by one server reply are. On one processor
// the three goroutines started together are all ready when the first
// runs; the scheduler may still run the first again at once now and
// then, so the test asks for most rounds, not all.
func TestCoalescerGathersReadyCallers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds = 20
	gathered := 0
	for range rounds {
		var c coalescer[int]
		var mu sync.Mutex // guards calls
		var calls [][]int
		run := func(vs []int) []error {
			mu.Lock()
			calls = append(calls, slices.Sorted(slices.Values(vs)))
			mu.Unlock()
			return make([]error, len(vs))
		}
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if err := c.do(i, run); err != nil {
					t.Errorf("item %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if len(calls) == 1 && slices.Equal(calls[0], []int{0, 1, 2}) {
			gathered++
		}
	}
	if gathered < rounds/2 {
		t.Fatalf("three callers ready together went in one call in %d of %d rounds, want most", gathered, rounds)
	}
}

// TestCoalescerHandedOnCallerTakesLateCallers: the caller a batch is
// handed to adds to it the callers that queued while it was being woken,
// here the caller that handed it on, which calls again at once. On one
// processor the caller that hands on runs on until it queues again,
// before the caller it woke runs; preemption may still come between now
// and then, so the test asks for most rounds, not all.
func TestCoalescerHandedOnCallerTakesLateCallers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds = 20
	took := 0
	for range rounds {
		var c coalescer[int]
		started, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex // guards calls
		var calls [][]int
		run := func(vs []int) []error {
			mu.Lock()
			calls = append(calls, slices.Clone(vs))
			mu.Unlock()
			if vs[0] == 0 {
				close(started)
				<-release
			}
			return make([]error, len(vs))
		}
		do := func(v int) {
			if err := c.do(v, run); err != nil {
				t.Errorf("item %d: %v", v, err)
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			do(0)
			do(2)
		})
		<-started
		wg.Go(func() { do(1) })
		queued(t, &c, 1)
		close(release)
		wg.Wait()
		if slices.EqualFunc(calls, [][]int{{0}, {1, 2}}, slices.Equal) {
			took++
		}
	}
	if took < rounds/2 {
		t.Fatalf("a handed-on caller took the caller queued while it was woken in %d of %d rounds, want most", took, rounds)
	}
}

// TestCoalescerQueuedCallerLeavesAtContextEnd: a caller queued behind a
// running call whose context ends returns its context's error at once,
// and its item is in no call; a caller whose item a call already took
// gets that call's outcome.
func TestCoalescerQueuedCallerLeavesAtContextEnd(t *testing.T) {
	var c coalescer[int]
	release := make(chan struct{})
	var mu sync.Mutex
	var ran []int
	run := func(vs []int) []error {
		mu.Lock()
		ran = append(ran, vs...)
		mu.Unlock()
		if vs[0] == 0 {
			<-release
		}
		return make([]error, len(vs))
	}
	ranNow := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ran)
	}
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pending)
	}
	first := make(chan error, 1)
	go func() { first <- c.do(0, run) }()
	require.Eventually(t, func() bool { return len(ranNow()) == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() { second <- c.doCtx(ctx, 1, run, nil) }()
	require.Eventually(t, func() bool { return queued() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-second:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the queued caller waits on after its context ended")
	}
	close(release)
	require.NoError(t, <-first)
	require.Equal(t, []int{0}, ranNow(), "the withdrawn item ran in no call")
	c.mu.Lock()
	require.False(t, c.busy)
	c.mu.Unlock()

	// Taken by a call before its context ended: the call's outcome.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, c.doCtx(ctx, 2, func(vs []int) []error { cancel(); return run(vs) }, nil))
	require.Equal(t, []int{0, 2}, ranNow())
}
