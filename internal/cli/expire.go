package cli

import (
	"flag"
	"fmt"

	"github.com/walq/walq/queue"
)

var requeueExpiredCmd = &command{
	name:  "requeue-expired",
	args:  "[--max-deliveries N] DIR",
	short: "end the leases that ran out",
	long: `Requeue-expired ends every lease of the queue in DIR whose deadline has
passed, such as that of a 'walq dequeue' never acked, and prints how many
it ended: each message is ready again, its delivery count kept. walq does
not know the application's MaxDeliveries and dead-letters nothing
itself, unless --max-deliveries N gives it: then a message that has had
N deliveries goes to the dead set instead, as the application's handle
with that limit sends it. The count is of both: the queue does not tell
how many went where, and the line printed says so ('walq stats' shows the
dead set). Without it, a message past the application's limit goes to the
dead set when the application would next deliver it. On a sorted or
windowed queue the leases are those of batches pulled and never acked:
their values are pending again, or, at N deliveries, dead values.

With a directory, the other writing commands end such leases too while
they run. On a server they do not (the application's handles end them at
its limit): with no application handle open, a lease that ran out lasts
until requeue-expired ends it.`,
	example: `walq requeue-expired /var/lib/app/jobs
walq requeue-expired --max-deliveries 5 /var/lib/app/jobs`,
	exits:        []int{exitOK, exitFailure, exitCorrupt, exitLocked},
	serverWrites: true,
	nargs:        [2]int{1, 1},
	setup: func(fs *flag.FlagSet) func(*env, []string) error {
		limit := fs.Int("max-deliveries", 0, "dead-letter a message that has had `N` deliveries (0: none)")
		return func(e *env, args []string) error {
			if *limit < 0 {
				return usagef("--max-deliveries must not be negative, not %d", *limit)
			}
			return runRequeueExpired(e, args[0], *limit)
		}
	},
}

func runRequeueExpired(e *env, target string, maxDeliveries int) (err error) {
	sv, err := openExpiringSorted(e, target, maxDeliveries)
	if err != nil {
		return err
	}
	if sv != nil {
		defer closeView(sv, &err)
		n, rerr := sv.requeueExpired()
		fmt.Fprintln(e.stdout, expiredLine(n, maxDeliveries))
		return rerr
	}
	q, err := openExpiring(e, target, maxDeliveries)
	if err != nil {
		return err
	}
	defer closeAny(q, &err)
	n, err := q.RequeueExpired()
	fmt.Fprintln(e.stdout, expiredLine(n, maxDeliveries))
	return err
}

// expiredLine says how many leases requeue-expired ended. Under a limit
// some of their messages may have gone to the dead set instead of back to
// ready: RequeueExpired counts both, so the line does not split them.
func expiredLine(n, maxDeliveries int) string {
	line := "ended " + plural(n, "lease")
	if n == 0 || maxDeliveries == 0 {
		return line
	}
	unit := "deliveries"
	if maxDeliveries == 1 {
		unit = "delivery"
	}
	return fmt.Sprintf("%s, back to ready or, at %d %s, to the dead set (the count does not split them)",
		line, maxDeliveries, unit)
}

// openExpiringSorted opens target as openExpiring does, when it holds a
// sorted or windowed queue; nil when it does not. Its leases are batches.
func openExpiringSorted(e *env, target string, maxDeliveries int) (sortedView, error) {
	o := *ownerOptions(&queue.Options{ManualRequeue: true})
	if maxDeliveries > 0 {
		o.MaxDeliveries = maxDeliveries
	}
	return sortedTargetWith(e, target, EngineOptions{MaxDeliveries: maxDeliveries}, o)
}

// openExpiring opens target as openAck does, with the engine or the
// directory, for requeue-expired: no lease ends in the background
// (ManualRequeue), and a message goes to the dead set at maxDeliveries
// (0: never).
func openExpiring(e *env, target string, maxDeliveries int) (queue.AckQueue, error) {
	if q, ok, err := engineQueue(e, target, EngineOptions{MaxDeliveries: maxDeliveries}); ok {
		return q, err
	}
	if err := checkQueueDir(target); err != nil {
		return nil, err
	}
	o := ownerOptions(&queue.Options{ManualRequeue: true})
	if maxDeliveries > 0 {
		o.MaxDeliveries = maxDeliveries
	}
	return openDirWith(e, target, o)
}
