package redisq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// sendTries is how many times a command is sent when its connection
// drops: the client sends nothing again (Open refuses one that would, see
// Options.AcceptDoubleRuns), so the handle sends again what is safe to
// run twice itself.
const sendTries = 4

// dropped reports whether err is a connection that dropped before the
// reply came (closed, reset, broken): the command may have run, which a
// read makes harmless. A timeout is not one: its wait was bounded on
// purpose.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// sendAgain runs send, and again, up to sendTries times in all, while its
// connection drops and ctx lasts. Only for a command whose second run
// leaves the server as its first left it, and replies as the first would
// have: a read (a no-writes function, CONFIG GET, GET, HGET), FUNCTION
// LOAD of the same code, an HSETNX whose field is read back after it, the
// function that writes nothing (writable.go), SUBSCRIBE.
func sendAgain(ctx context.Context, send func() error) error {
	err := send()
	for try := 1; try < sendTries && dropped(err) && ctx.Err() == nil; try++ {
		err = send()
	}
	return err
}

// refusals are the codes of the server's error replies that prove the
// command did not run: Redis 7 answers them in processCommand, before it
// calls the command. MOVED, ASK, TRYAGAIN and CLUSTERDOWN come from the
// cluster's routing of the command's keys (cluster.c getNodeByQuery):
// the slot is another node's, is migrating and lacks some or all of the
// keys, or the cluster is down. READONLY is a replica refusing a command
// flagged as a write (a function without the no-writes flag is one: its
// flags are read before it runs), as a demoted primary does. LOADING is a
// server still reading its data after a restart.
var refusals = [...]string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING"}

// refused reports whether err is one of the server's refusals: the
// command did not run, so sending it again is safe whatever it does.
func refused(err error) bool {
	for _, code := range refusals {
		if refusedFor(err, code) {
			return true
		}
	}
	return false
}

// unsent reports whether err proves the call was never written to a
// server: no connection could be made for it (a dial error: refused, no
// route, the dial's timeout; the address of a primary that died, until
// the client's map of the slots names its replica), none of the client's
// pool came free in time (redis.ErrPoolTimeout), or the new connection
// drawn for it failed while the client set it up (setupFailed). Sending
// it again is then safe whatever it does. An error of the call's own
// write or read (reset, EOF, broken pipe, a timeout waiting for the
// reply) is not one, however it is wrapped: the call may have run.
func unsent(err error) bool {
	var oe *net.OpError
	return errors.Is(err, redis.ErrPoolTimeout) || (errors.As(err, &oe) && oe.Op == "dial") || setupFailed(err)
}

// setupFailed reports whether err is the failure, a timeout or a
// system call's error (a reset, a broken pipe), of a read or write of
// the commands go-redis sends on a new connection before it hands the
// connection to the call: HELLO, CLIENT SETINFO (and CLIENT
// MAINT_NOTIFICATIONS where it sends it), and the client's
// Options.OnConnect where it returns its command's error as it came.
// The call's own command was never written: go-redis sends it only on
// a connection whose setup succeeded. go-redis (initPooledConn) returns
// such a failure with its outer error taken off, so that the
// *net.OpError of the read or write is gone and the error under it
// comes alone (os.ErrDeadlineExceeded, an *os.SyscallError), where a
// read or write of the call's own command returns the *net.OpError
// itself. Not told apart so: a timeout of the AUTH go-redis sends after
// a refused HELLO (a server before Redis 6, a proxy), or of the pipeline
// it sends after HELLO for Options.DB, ClientName or a cluster's
// ReadOnly, which both come in their *net.OpError (counted as a call
// that may have run), and an EOF, which is bare either way. A Dialer
// whose connections return their errors without a *net.OpError would
// make a call's own failed read look like a setup's: go-redis's dialer
// and crypto/tls keep it. TestUnsent pins both shapes.
func setupFailed(err error) bool {
	var oe *net.OpError
	var se *os.SyscallError
	return !errors.As(err, &oe) && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &se))
}

// unrun reports whether err proves the call did not run: the server
// refused it (refused), or it was never sent (unsent). A dial's error or
// the pool's timeout proves it only where the client sends nothing again
// itself: a client that does (h.resends) returns the error of its last
// send, which may follow one written that ran and lost its reply.
func (h *handle) unrun(err error) bool { return refused(err) || !h.resends && unsent(err) }

// The wait before a refused call is sent again: rideFirst, doubling up to
// rideMost. A cluster settles in tens or hundreds of milliseconds after
// a failover or once a slot's keys moved.
const (
	rideFirst = 5 * time.Millisecond
	rideMost  = 200 * time.Millisecond
)

// callerKey is the context key under which a lease call's context
// (leaseContext) carries its caller's context.
type callerKey struct{}

// rideOnceKey is the context key of a call that its caller sends again
// itself when the server refuses it (ridden): a grouped call, which
// rebuilds its arguments between sends from the callers still there.
type rideOnceKey struct{}

// ridden returns ctx marked for rideMoves to send once, the refusal
// coming back to ctx's owner, which rides it.
func ridden(ctx context.Context) context.Context {
	return context.WithValue(ctx, rideOnceKey{}, true)
}

// rideMoves runs send, and again while the server refuses it (refused)
// or it could not be sent (unsent: no connection to the slot's owner):
// after a failover (a primary that died too, until the client learns
// its replica took over) or while the queue's slot migrates, until the
// cluster settles. Before each wait it asks a cluster client to reload
// its map of the slots (go-redis reloads it in the background, at most once every
// 200ms), and sends to whatever owns the slot then. An ASK is waited out
// too instead of followed with ASKING: the importing node runs a command
// of several keys only if it holds all of them (else TRYAGAIN), and the
// queue's functions name keys that do not exist (an empty lease set, no
// dead letters), so the call could only run once the migration ends.
// It sends again for at most callTimeout from the first refusal (or
// unsent failure), and stops as soon as ctx ends, the caller's context
// of a lease call ends (nothing was leased) or the handle closes
// (queue.ErrClosed), unless ctx marks a call Close waits for (awaited),
// which rides on as on an open handle; the result is then the last
// refusal or failure, or the context's error with it.
// The first send runs under ctx; each send after it under ctx ended at
// that bound too, so that a dial that hangs (an address that drops what
// is sent to it) or a wait for the pool ends there: a call whose ctx has
// no deadline takes at most one send and callTimeout. (A lease call's
// ctx, leaseContext, ends at callTimeout from the call's start, never
// later than that bound, so the bound cuts no wait for a lease's reply.)
// On a client that ends a command's wait for its reply with its context
// (go-redis ContextTimeoutEnabled) the bound ends that wait too: a send
// after the first that got a connection just before the bound may run
// and still return the bound's timeout, as any call whose context ends
// while it waits. A send that the bound ended (go-redis returns the
// context's error of a wait for a connection) returns its error with the
// first failure's.
func (h *handle) rideMoves(ctx context.Context, send func(context.Context) (any, error)) (any, error) {
	v, err := send(ctx)
	if !h.unrun(err) || ctx.Value(rideOnceKey{}) != nil {
		return v, err
	}
	first := err
	caller, _ := ctx.Value(callerKey{}).(context.Context)
	if caller == nil {
		caller = ctx
	}
	closed := h.closed
	if ctx.Value(awaitedKey{}) != nil { // Close waits for it: it rides on, within callTimeout
		closed = nil
	}
	wait := func(t *time.Timer, err error) error {
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w (the call did not run: %w)", ctx.Err(), err)
		case <-caller.Done():
			return fmt.Errorf("%w (the call did not run: %w)", caller.Err(), err)
		case <-closed:
			return queue.ErrClosed
		}
	}
	err, bound, stopped := h.rideOn(ctx, err, h.unrun, wait, func(ctx context.Context) (err error) {
		v, err = send(ctx)
		return err
	})
	switch {
	case stopped != nil:
		return nil, stopped
	case bound: // the bound, not ctx, ended the last send
		err = fmt.Errorf("%w (sent again within %v, Options.OpTimeout, after the first send failed: %v)",
			err, h.callTimeout(), first)
	}
	return v, err
}

// rideOn sends again (send) what failed with err, after a wait, while
// again(err) holds: the loop of rideMoves and rideAgain. Before each
// wait it asks a cluster client to reload its map of the slots; the
// waits start at rideFirst and double up to rideMost; it sends again for
// at most callTimeout from now, each send under ctx ended there too.
// wait waits out its timer, or returns the error to stop with (stopped).
// bound tells whether that end, not ctx, ended the last send, which
// failed.
func (h *handle) rideOn(ctx context.Context, err error, again func(error) bool,
	wait func(*time.Timer, error) error, send func(context.Context) error) (last error, bound bool, stopped error) {
	end := time.Now().Add(h.callTimeout())
	bounded, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	for pause := rideFirst; again(err) && time.Now().Add(pause).Before(end); pause = min(2*pause, rideMost) {
		h.reloadSlots()
		t := time.NewTimer(pause)
		if stopped := wait(t, err); stopped != nil {
			t.Stop()
			return err, false, stopped
		}
		err = kept(ctx, send(bounded), err, again)
	}
	return err, err != nil && ctx.Err() == nil && bounded.Err() != nil, nil
}

// kept returns next, the error of a send again, naming prev, the
// failure that send answered, where ctx ended and next is no such
// failure itself (again): a send that ctx ended, before it got a
// connection or while it waited for its reply, returns ctx's error
// alone, and the caller is told what the call waited for. prev is named
// as text, not wrapped: next's send may have run (a wait for the reply
// ended), so the error must not pass for a refusal.
func kept(ctx context.Context, next, prev error, again func(error) bool) error {
	if next == nil || ctx.Err() == nil || again(next) {
		return next
	}
	return fmt.Errorf("%w (ended while sending again what failed with: %v)", next, prev)
}

// passing reports whether err is a failure that a failover or a
// migration of the queue's slot shows and that passes once the cluster
// settles: no connection could be made (unsent) or the server refused
// the command (refused), but for READONLY, which Open reports as the
// answer of a replica (a server that stays one).
func passing(err error) bool {
	return unsent(err) || (refused(err) && !refusedFor(err, "READONLY"))
}

// rideAgain runs send, a command whose second run leaves the server as
// its first left it and replies as the first would have (sendAgain's),
// as sendAgain does, and sends it again after a wait while its failure
// is passing: Open's checks, its loading of the library and its
// subscription ride a failover so. As rideMoves, it asks a cluster client
// to reload its map of the slots before each wait, and sends again for at
// most callTimeout from the first such failure, each send after the first
// under ctx ended at that bound; it stops when ctx ends. send gets the
// context to send under, and looks up again whatever server it talks to.
// An error after the bound says what the command waited for.
func (h *handle) rideAgain(ctx context.Context, send func(context.Context) error) error {
	again := func(ctx context.Context) error { return sendAgain(ctx, func() error { return send(ctx) }) }
	err := again(ctx)
	if !passing(err) {
		return err
	}
	first := err
	wait := func(t *time.Timer, err error) error {
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting to send again what failed with: %w)", ctx.Err(), err)
		}
	}
	err, bound, stopped := h.rideOn(ctx, err, passing, wait, again)
	switch {
	case stopped != nil:
		return stopped
	case bound || err != nil && ctx.Err() == nil && passing(err):
		return fmt.Errorf("%w (sent again within %v, Options.OpTimeout, while no connection could be made "+
			"for it or the cluster refused it, as during a failover; the first send failed: %v)", err, h.callTimeout(), first)
	}
	return err
}

// reloadSlots asks a cluster client to read the cluster's map of slots
// again, in the background.
func (h *handle) reloadSlots() {
	if cc, ok := h.rdb.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}
