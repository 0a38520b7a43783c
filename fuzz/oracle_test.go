package fuzz_test

import (
	"testing"

	"github.com/walq/walq/fuzz"
)

// TestOracle checks the checker: every violation it exists to catch is
// caught, and what is allowed passes.
func TestOracle(t *testing.T) {
	cases := []struct {
		name  string
		feed  func(o *fuzz.Oracle)
		drain []string
		want  fuzz.Result // only the counters compared below
	}{
		{"acknowledged and drained", func(o *fuzz.Oracle) { o.EnqueueAttempt("a"); o.Enqueued("a") },
			[]string{"a"}, fuzz.Result{}},
		{"acknowledged and missing is lost", func(o *fuzz.Oracle) { o.EnqueueAttempt("a"); o.Enqueued("a") },
			nil, fuzz.Result{Lost: 1}},
		{"attempt may be missing", func(o *fuzz.Oracle) { o.EnqueueAttempt("a") },
			nil, fuzz.Result{ResolvedAbsent: 1}},
		{"attempt may be present", func(o *fuzz.Oracle) { o.EnqueueAttempt("a") },
			[]string{"a"}, fuzz.Result{ResolvedPresent: 1}},
		{"never enqueued is unexpected", func(o *fuzz.Oracle) {},
			[]string{"x"}, fuzz.Result{Unexpected: 1}},
		{"acked then drained is redelivered", func(o *fuzz.Oracle) {
			o.Enqueued("a")
			o.Delivered("a")
			o.AckAttempt("a")
			o.Acked("a")
		}, []string{"a"}, fuzz.Result{RedeliveredAfterAck: 1}},
		{"ack in flight may go either way", func(o *fuzz.Oracle) {
			o.Enqueued("a")
			o.Delivered("a")
			o.AckAttempt("a")
		}, []string{"a"}, fuzz.Result{Duplicates: 1}},
		{"ack in flight took effect", func(o *fuzz.Oracle) {
			o.Enqueued("a")
			o.Delivered("a")
			o.AckAttempt("a")
		}, nil, fuzz.Result{ResolvedAbsent: 1}},
		{"failed ack leaves it live", func(o *fuzz.Oracle) {
			o.Enqueued("a")
			o.Delivered("a")
			o.AckAttempt("a")
			o.AckFailed("a")
		}, nil, fuzz.Result{Lost: 1}},
		{"leased at the crash comes back", func(o *fuzz.Oracle) { o.Enqueued("a"); o.Delivered("a") },
			[]string{"a"}, fuzz.Result{Duplicates: 1}},
		{"nacked comes back, no duplicate", func(o *fuzz.Oracle) {
			o.Enqueued("a")
			o.Delivered("a")
			o.Released("a")
		}, []string{"a"}, fuzz.Result{}},
		{"delivery proves the enqueue", func(o *fuzz.Oracle) { o.EnqueueAttempt("a"); o.Delivered("a") },
			nil, fuzz.Result{Lost: 1}},
		{"twice in one drain", func(o *fuzz.Oracle) { o.Enqueued("a") },
			[]string{"a", "a"}, fuzz.Result{DrainDuplicates: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := fuzz.NewOracle()
			c.feed(o)
			got := o.Recovered(c.drain)
			if got.Lost != c.want.Lost || got.Unexpected != c.want.Unexpected ||
				got.RedeliveredAfterAck != c.want.RedeliveredAfterAck || got.DrainDuplicates != c.want.DrainDuplicates ||
				got.Duplicates != c.want.Duplicates || got.ResolvedAbsent != c.want.ResolvedAbsent ||
				got.ResolvedPresent != c.want.ResolvedPresent {
				t.Fatalf("got %s", got)
			}
		})
	}
}

// TestOracleHoldsRecoveryToItsWord checks that an attempt resolved as absent
// may not come back later, and one resolved as present may not vanish.
func TestOracleHoldsRecoveryToItsWord(t *testing.T) {
	o := fuzz.NewOracle()
	o.EnqueueAttempt("gone")
	o.EnqueueAttempt("kept")
	if r := o.Recovered([]string{"kept"}); !r.OK() {
		t.Fatalf("first recovery: %s", r)
	}
	if r := o.Recovered([]string{"gone", "kept"}); r.Unexpected != 1 {
		t.Fatalf("a resurrected attempt must be unexpected: %s", r)
	}
	if r := o.Recovered(nil); r.Lost != 1 {
		t.Fatalf("a confirmed attempt that vanishes is lost: %s", r)
	}
	o.Delivered("gone")
	if r := o.Result(); r.Unexpected != 2 {
		t.Fatalf("delivering a resolved-absent token is unexpected: %s", r)
	}
}
