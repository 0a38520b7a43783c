package redisq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq"
	"github.com/walq/walq/redisq/internal/redistest"
)

// wrappedClient is a UniversalClient whose type redisq does not know, as
// an application's wrapper of its client would be: its retries cannot be
// read.
type wrappedClient struct{ *redis.Client }

// openAll opens a queue, a sorted and a windowed queue on rdb with opts,
// closing what opened, and returns the three errors.
func openAll(ctx context.Context, rdb redis.UniversalClient, opts redisq.Options) []error {
	q, err1 := redisq.Open(ctx, rdb, "retries", &opts)
	if err1 == nil {
		_ = q.Close()
	}
	s, err2 := redisq.OpenSorted[int64](ctx, rdb, "retries-s", &redisq.SortedOptions{Options: opts})
	if err2 == nil {
		_ = s.Close()
	}
	w, err3 := redisq.OpenWindowed(ctx, rdb, "retries-w", &redisq.WindowOptions{SortedOptions: redisq.SortedOptions{Options: opts}, Window: time.Second})
	if err3 == nil {
		_ = w.Close()
	}
	return []error{err1, err2, err3}
}

// requireRetriesRefused: each error is queue.ErrInvalidOptions and says
// what to change.
func requireRetriesRefused(t *testing.T, errs []error, what string) {
	t.Helper()
	for i, err := range errs {
		require.ErrorIs(t, err, queue.ErrInvalidOptions, "%s, open %d", what, i)
		require.ErrorContains(t, err, "MaxRetries: -1", "%s, open %d", what, i)
		require.ErrorContains(t, err, "Options.AcceptDoubleRuns", "%s, open %d", what, i)
	}
}

// TestOpenRefusesRetries: Open, OpenSorted and OpenWindowed of a handle
// that may write refuse a client that would send a call again after its
// connection dropped (go-redis's default MaxRetries, 3, or any positive
// count; a Ring's likewise; a client whose retries cannot be read), with
// queue.ErrInvalidOptions naming the setting to change. A client with
// MaxRetries -1 opens, and a ReadOnly handle, whose calls change nothing,
// opens on any client.
func TestOpenRefusesRetries(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	newClient := func(retries int) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: retries})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for _, retries := range []int{0, 1, 3} { // 0: go-redis's default of 3
		requireRetriesRefused(t, openAll(ctx, newClient(retries), redisq.Options{}), fmt.Sprintf("client MaxRetries %d", retries))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, MaxRetries: 2})
	t.Cleanup(func() { _ = cc.Close() })
	requireRetriesRefused(t, openAll(ctx, cc, redisq.Options{}), "cluster client MaxRetries 2")
	// A cluster client sends a command again after its connection dropped
	// up to MaxRedirects times (go-redis's default, 0, means 3) whatever
	// its MaxRetries (TestClusterReplyLostAfterRun).
	redirecting := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}, MaxRetries: -1})
	t.Cleanup(func() { _ = redirecting.Close() })
	requireRetriesRefused(t, openAll(ctx, redirecting, redisq.Options{}), "cluster client MaxRedirects default")
	for _, err := range openAll(ctx, redirecting, redisq.Options{}) {
		require.ErrorContains(t, err, "MaxRedirects: -1")
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}}) // go-redis's default: 3
	t.Cleanup(func() { _ = ring.Close() })
	requireRetriesRefused(t, openAll(ctx, ring, redisq.Options{}), "ring default")
	requireRetriesRefused(t, openAll(ctx, wrappedClient{newClient(-1)}, redisq.Options{}), "unknown client type")

	for i, err := range openAll(ctx, newClient(-1), redisq.Options{}) {
		require.NoError(t, err, "client MaxRetries -1, open %d", i)
	}
	q, err := redisq.Open(ctx, newClient(0), "retries", &redisq.Options{ReadOnly: true})
	require.NoError(t, err, "a ReadOnly handle on a client that retries")
	require.NoError(t, q.Close())
	q, err = redisq.Open(ctx, wrappedClient{newClient(0)}, "retries", &redisq.Options{ReadOnly: true})
	require.NoError(t, err, "a ReadOnly handle on a client of unknown type")
	require.NoError(t, q.Close())
}

// TestOpenRefusesRetriesFirst: the refusal comes before Open asks the
// server anything, so it names the client's setting even when the
// server is down.
func TestOpenRefusesRetriesFirst(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	errs := openAll(context.Background(), rdb, redisq.Options{})
	requireRetriesRefused(t, errs, "server down")
	require.False(t, errors.Is(errs[0], context.DeadlineExceeded))
}

// TestAcceptDoubleRuns: the opt-out opens every handle on a client that
// retries and on one whose retries cannot be read; a Ring that does not
// retry opens without it.
func TestAcceptDoubleRuns(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	retrying := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer retrying.Close()
	for i, err := range openAll(ctx, retrying, redisq.Options{AcceptDoubleRuns: true}) {
		require.NoError(t, err, "client default, open %d", i)
	}
	for i, err := range openAll(ctx, wrappedClient{retrying}, redisq.Options{AcceptDoubleRuns: true}) {
		require.NoError(t, err, "unknown client type, open %d", i)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}, MaxRetries: -1})
	defer ring.Close()
	for i, err := range openAll(ctx, ring, redisq.Options{}) {
		require.NoError(t, err, "ring MaxRetries -1, open %d", i)
	}
}

// TestRetriesOfEachClient: the refusal reads the retries of each way
// go-redis builds a client: a Sentinel failover client (a *redis.Client)
// and a failover cluster client (a *redis.ClusterClient whose
// MaxRedirects is the FailoverOptions' MaxRetries), NewUniversalClient's
// picks, and ParseURL's and ParseClusterURL's options (no max_retries is
// go-redis's default, 3). Each is refused with its default retries and
// passes the refusal with MaxRetries -1 (MaxRedirects -1 where it has
// one). No server answers: what passes the refusal fails later, on its
// connection.
func TestRetriesOfEachClient(t *testing.T) {
	ctx := context.Background()
	const down = "127.0.0.1:1"
	dial := 100 * time.Millisecond
	url := func(q string) *redis.Options {
		o, err := redis.ParseURL("redis://" + down + "/0" + q)
		require.NoError(t, err)
		o.DialTimeout = dial
		return o
	}
	clusterURL := func(q string) *redis.ClusterOptions {
		o, err := redis.ParseClusterURL("redis://" + down + "?addr=127.0.0.1:2" + q)
		require.NoError(t, err)
		o.DialTimeout = dial
		return o
	}
	failover := func(retries int) *redis.FailoverOptions {
		return &redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{down}, MaxRetries: retries, DialTimeout: dial}
	}
	universal := func(retries, redirects int, addrs ...string) *redis.UniversalOptions {
		return &redis.UniversalOptions{Addrs: addrs, MaxRetries: retries, MaxRedirects: redirects, DialTimeout: dial}
	}
	sentinel := func(retries int) *redis.UniversalOptions {
		o := universal(retries, 0, down)
		o.MasterName = "m"
		return o
	}
	cases := []struct {
		name    string
		retries func() redis.UniversalClient // go-redis's default retries
		none    func() redis.UniversalClient // retries and redirects -1
	}{
		{"failover", func() redis.UniversalClient { return redis.NewFailoverClient(failover(0)) },
			func() redis.UniversalClient { return redis.NewFailoverClient(failover(-1)) }},
		{"failover cluster", func() redis.UniversalClient { return redis.NewFailoverClusterClient(failover(0)) },
			func() redis.UniversalClient { return redis.NewFailoverClusterClient(failover(-1)) }},
		{"universal one address", func() redis.UniversalClient { return redis.NewUniversalClient(universal(0, 0, down)) },
			func() redis.UniversalClient { return redis.NewUniversalClient(universal(-1, -1, down)) }},
		{"universal cluster", func() redis.UniversalClient { return redis.NewUniversalClient(universal(0, 0, down, "127.0.0.1:2")) },
			func() redis.UniversalClient { return redis.NewUniversalClient(universal(-1, -1, down, "127.0.0.1:2")) }},
		{"universal sentinel", func() redis.UniversalClient { return redis.NewUniversalClient(sentinel(0)) },
			func() redis.UniversalClient { return redis.NewUniversalClient(sentinel(-1)) }},
		{"ParseURL", func() redis.UniversalClient { return redis.NewClient(url("")) },
			func() redis.UniversalClient { return redis.NewClient(url("?max_retries=-1")) }},
		{"ParseClusterURL", func() redis.UniversalClient { return redis.NewClusterClient(clusterURL("")) },
			func() redis.UniversalClient {
				return redis.NewClusterClient(clusterURL("&max_retries=-1&max_redirects=-1"))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rdb := c.retries()
			defer rdb.Close()
			requireRetriesRefused(t, openAll(ctx, rdb, redisq.Options{TrustServer: true}), c.name)
			none := c.none()
			defer none.Close()
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			for i, err := range openAll(short, none, redisq.Options{TrustServer: true}) {
				require.Error(t, err, "open %d: no server answers", i)
				require.NotContains(t, err.Error(), "AcceptDoubleRuns", "open %d", i)
			}
		})
	}
}
