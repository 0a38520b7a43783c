// Walq-redis is the walq command with the Redis backend linked in: every
// command of walq, and where stats, dlq, enqueue, dequeue, ack, nack,
// extend and requeue-expired take DIR they also take the URL of a queue on
// a Redis server (verify, repair, dump and compact, which read a queue's
// files, refuse one):
//
//	redis://[user:password@]host:port[/db]/NAME[?OPTIONS]
//	rediss://…/NAME   (TLS)
//
// The last path element is the queue's name (as given to redisq.Open),
// %-unescaped: a name with a '/' in it is written with %2F (team%2Fjobs
// names team/jobs), a '?' with %3F, a '#' with %23 (a raw '#', a URL
// fragment, is refused), and a literal '%' must be written %25.
// What comes before it is the server, as go-redis's ParseURL reads it,
// and so is a query after it: redis://host:6379/0/jobs?protocol=3&dial_timeout=5s
// names the queue jobs on the server redis://host:6379/0?protocol=3&dial_timeout=5s;
// an option ParseURL does not know is refused.
// stats, requeue-expired and dlq list, show, requeue and purge also run
// on a sorted or windowed queue (redisq.OpenSorted, OpenWindowed), as on
// a directory's: stats prints its kind and sort key type, pending values
// and keys, leased values and batches and dead values; requeue-expired
// ends its batches' leases that ran out; dlq names its dead values as in
// a directory (SEQ@PUBLISHED_UNIX_NS). The other commands run on ack
// queues: a name that holds a sorted or windowed queue and no ack queue
// is refused.
//
//	walq-redis enqueue redis://localhost:6379/0/jobs 'resize photo 42'
//	walq-redis dequeue --wait 10s redis://localhost:6379/0/jobs
//	walq-redis ack redis://localhost:6379/0/jobs 17.8812394723
//	walq-redis stats redis://localhost:6379/0/jobs
//	walq-redis dlq requeue --all redis://localhost:6379/0/jobs
//	walq-redis requeue-expired --max-deliveries 10 redis://localhost:6379/0/jobs
//	walq-redis demo --redis redis://localhost:6379/0
//
// Commands that only read (stats, dlq list, dlq show) open the queue with
// redisq's ReadOnly option and change nothing on it: they start no
// housekeeping, so they end none of the application's expired leases
// (which its MaxDeliveries may dead-letter) and make no delayed message
// ready. They do not check the server's configuration, run on a
// read-only replica that holds redisq's function library, and load the
// library only into a server that lacks it (a replica cannot). The others open the
// queue with redisq.SyncInterval: they refuse a server without appendonly
// yes and maxmemory-policy noeviction (--trust-server skips that check,
// which needs a user that may run CONFIG GET, on a server known to be so
// configured), and a change is fsynced when the
// command returns only if the server runs appendfsync always. They apply no
// MaxDeliveries and no dedup window of their own, since the application's
// are recorded nowhere on the server: a dequeue or nack dead-letters
// nothing, an ack keeps a producer-given id for the application's window
// to judge (its enqueues forget the ids that window has passed), and an
// enqueue refuses every acked id still kept. Nor do they end the
// application's expired leases (redisq's ManualRequeue), which its
// handles end, dead-letter at its limit: they change nothing but what
// they are asked. With no application handle open, such a lease (a
// dequeue never acked) lasts until requeue-expired ends it: the message
// is ready again, or dead at --max-deliveries N, the limit its operator
// gives. A user whose ACL lets it only read the queue is refused
// them, saying so; the commands that only read serve it.
package main

import (
	"os"

	"github.com/walq/walq/internal/cli"
)

func main() { os.Exit(cli.Main(engine{})) }
