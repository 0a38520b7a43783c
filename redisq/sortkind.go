package redisq

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// checkKind refuses a handle whose sort key kind (sortKind) is not
// the one the sorted queue records in the field "kind" of its stats hash:
// its values would be read as other keys and sort parts. A new queue
// (no seq yet) records the handle's kind; one made by an earlier version
// records none, and its pull refuses a handle of another kind instead
// (placed in scripts/sorted.lua), for the kinds whose sort parts differ
// in length. It talks to the queue's master (primary): a replica that
// lags could show a queue with values as new, and have it stamped.
// It then checks the form (checkForm). A reader (a ReadOnly handle)
// records nothing: on a queue that records no kind it checks the form
// alone.
func checkKind(ctx context.Context, h *handle, name, seqKey, statsKey, kind, form string, reader bool) error {
	got, err := h.hget(ctx, statsKey, "kind")
	if errors.Is(err, redis.Nil) && reader {
		return checkForm(ctx, h, name, statsKey, form)
	}
	if errors.Is(err, redis.Nil) {
		found, xerr := h.present(ctx, seqKey)
		if xerr != nil {
			return fmt.Errorf("redisq: sorted queue %q: look for its values: %w", name, xerr)
		}
		if found {
			return nil
		}
		// The form first: a handle that finds the kind finds the form.
		if err := h.hsetnx(ctx, statsKey, "form", form); err != nil {
			return fmt.Errorf("redisq: sorted queue %q: record its form: %w", name, err)
		}
		if err := h.hsetnx(ctx, statsKey, "kind", kind); err != nil {
			return fmt.Errorf("redisq: sorted queue %q: record its sort key kind: %w", name, err)
		}
		got, err = h.hget(ctx, statsKey, "kind")
	}
	if err != nil {
		return fmt.Errorf("redisq: sorted queue %q: read its sort key kind: %w", name, err)
	}
	if got != kind {
		return fmt.Errorf("%w: redisq: sorted queue %q holds sort keys of kind %s, this handle's are %s",
			queue.ErrInvalidOptions, name, got, kind)
	}
	return checkForm(ctx, h, name, statsKey, form)
}

// checkForm refuses a handle whose form ("sorted" or "windowed") is not
// the one the queue records in the field "form" of its stats hash, as
// the embedded queue refuses to open one kind as the other: a sorted
// handle on a windowed queue would pull keys before their window
// closes. A queue made by an earlier version records none, and takes
// either.
func checkForm(ctx context.Context, h *handle, name, statsKey, form string) error {
	got, err := h.hget(ctx, statsKey, "form")
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redisq: sorted queue %q: read its form: %w", name, err)
	}
	if got != form {
		return fmt.Errorf("%w: redisq: queue %q is a %s queue, this handle's is %s",
			queue.ErrInvalidOptions, name, got, form)
	}
	return nil
}

// checkSingle refuses a writing handle whose SingleFlight is not the one
// the sorted queue records in the field "single" of its stats hash ("1";
// "0" set by hand): a handle without it would put a key with a batch out
// back in the pull order (its pull, its ack, its requeue of a dead value)
// and a second batch of the key would be leased at once. A handle with
// SingleFlight records it when the queue records none (a new queue, or
// one made by an earlier version); a handle without records nothing, so
// that a tool that opens the queue first does not stamp it. A master that
// refuses the write for now (past maxmemory, short of replicas) is left
// unrecorded, for a later open: consumers must open to drain it. A field
// that holds neither "0" nor "1" refuses every writing handle, quoting it.
// The scripts decide by the recorded "1" as well (singleFlight in
// scripts/sorted.lua): a handle without SingleFlight that opened before
// one with it recorded it keeps a key with a batch out out of the pull
// order too. A reader (a ReadOnly handle) neither records nor checks it.
func checkSingle(ctx context.Context, h *handle, name, statsKey string, single bool) error {
	want := "0"
	if single {
		want = "1"
	}
	got, err := h.hget(ctx, statsKey, "single")
	if errors.Is(err, redis.Nil) {
		if !single {
			return nil
		}
		if err := h.hsetnx(ctx, statsKey, "single", want); err != nil {
			if refusedFor(err, "OOM") || refusedFor(err, "NOREPLICAS") {
				return nil
			}
			return fmt.Errorf("redisq: sorted queue %q: record its SingleFlight: %w", name, err)
		}
		got, err = h.hget(ctx, statsKey, "single")
	}
	if err != nil {
		return fmt.Errorf("redisq: sorted queue %q: read its SingleFlight: %w", name, err)
	}
	if got != "0" && got != "1" {
		return fmt.Errorf("%w: redisq: sorted queue %q holds %q in the field single of %s, not 0 or 1: stop every handle and set it to the queue's SingleFlight (HSET %s single 1, or HSET %s single 0)",
			queue.ErrInvalidOptions, name, got, statsKey, statsKey, statsKey)
	}
	if got != want {
		return fmt.Errorf("%w: redisq: sorted queue %q records SingleFlight %v, this handle's is %v: every handle must agree (to change it, stop every handle and run HSET %s single %s)",
			queue.ErrInvalidOptions, name, got == "1", single, statsKey, want)
	}
	return nil
}

// hget reads a field of the stats hash key on the queue's master
// (primary, looked up again for each send); a read that meets a dropped
// connection or a failover is sent again (rideAgain).
func (h *handle) hget(ctx context.Context, key, field string) (string, error) {
	var v string
	err := h.rideAgain(ctx, func(ctx context.Context) (err error) {
		v, err = h.primary(ctx).HGet(ctx, key, field).Result()
		return err
	})
	return v, err
}

// hsetnx sets field of the hash key unless it is set, on the queue's
// master as hget. One that meets a dropped connection or a failover is
// sent again (rideAgain): a second run after a first that set the field
// sets nothing, and the callers read the field back (hget) rather than
// trust the reply.
func (h *handle) hsetnx(ctx context.Context, key, field, v string) error {
	return h.rideAgain(ctx, func(ctx context.Context) error { return h.primary(ctx).HSetNX(ctx, key, field, v).Err() })
}
