// Walq looks inside a walq queue directory, repairs it, moves its dead
// letters and scripts it, without writing Go.
//
// Usage:
//
//	walq <command> [flags] DIR [arguments]
//	walq help <command>
//
// The commands:
//
//	demo        the ack-queue scenario end to end, with a crash and its recovery
//	stats       counts, ages, bytes on disk, log positions
//	dump        every log record as one JSON line
//	verify      check every checksum and the replay, changing nothing
//	repair      back the directory up, then drop what damage lost (under the lock)
//	dlq         list, show, requeue or purge dead letters
//	enqueue     add a message (payload from the argument or stdin)
//	dequeue     lease the next message and print it with its receipt
//	ack, nack   finish or give back a delivery by its receipt
//	extend      give a delivery more time by its receipt
//	requeue-expired  end the leases that ran out (--max-deliveries N: dead at N)
//	compact     snapshot and truncate the log now
//	version     walq's version and the on-disk formats it reads and writes
//
// Flags come before DIR, as in "walq dump --from 100 DIR"; flags after it
// are accepted too. Every command takes --help.
//
// # Exit status
//
//	0  success
//	1  usage error or failure; demo: a message was lost
//	2  the queue is corrupt (verify and repair say where)
//	3  another process has the directory open
//	4  dequeue: no message is ready
//	5  ack, nack, extend, dlq: no such delivery or dead letter (lease lost)
//	6  enqueue: the id is already in use
//	7  verify: a torn tail only (repairable: the next open cuts it)
//
// # Safety
//
// stats, dump, verify and dlq list and show change nothing: no record, no
// snapshot, no lock file, no repair; a torn log tail or the leases of a
// crashed process are reported and left to the next open. stats, dump and
// dlq list and show also read a queue that another process has open, as
// its files stand (stats and dlq say so on stderr); verify reads under a
// shared lock and refuses it with exit status 3. The other commands open
// the queue as its owner, as an application would: the open cuts a torn
// log tail and makes the leases of a crashed process ready again, and walq
// says so on stderr when it does. They refuse, with exit status 3, a
// directory that another process has open.
//
// Progress bars are drawn on stderr when it is a terminal, and never
// otherwise.
package main
