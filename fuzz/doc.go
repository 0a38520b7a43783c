// Package fuzz is walq's crash-safety and fuzz suite: the tests in this
// directory kill, tear, damage and starve queues on purpose and check that
// nothing acknowledged is ever lost.
//
// The package itself exports one thing, the Oracle: the single checker that
// every crash test feeds with what it saw acknowledged and with what a full
// drain after recovery returned. The tests are in the _test.go files, one
// per crash model:
//
//	oracle.go              the checker: lost, unexpected, redelivered after ack, duplicates
//	kill9_test.go          a child process SIGKILLed at random moments, hundreds of times
//	kill9compact_test.go   the same with 4 KiB segments and a compaction wanted after every append
//	deadkill9_test.go      the same around the dead-letter sets: requeues, purges, MaxDeliveries
//	readers_test.go        Peek, DeadLetters, DeadValues, Browse beside compactions that cut the log
//	powerloss_test.go      power loss on a crash file system at every durable operation, 10,000+ states
//	powerloss_reopen_test.go  a second power loss during the Open that repairs a crash state
//	powerloss_readonly_test.go  a crash state's read-only open, salvage and Verify held to its open
//	fault_test.go          the Nth file operation fails, for every N: errors reach callers and are sticky
//	tail_test.go           every byte offset of the last entries cut, zeroed, extended
//	damage_test.go         mid-log and snapshot damage: ErrCorrupt with location, or salvage
//	snapstep_test.go       a crash at each step of a snapshot and of the log truncation after it
//	ioerror_test.go        writes failing in a child (RLIMIT_FSIZE, a full tmpfs): errors are sticky
//	move_crash_test.go     a crash between a compaction's copies and its cursor advance
//	fuzz_test.go           go test -fuzz targets: segments, snapshots, operation sequences
//	model_test.go          the in-memory model of the ack queue the sequences run against
//	policy_test.go         the options a reopen of the model fuzzers may change
//	regress_test.go        regression tests of bugs found outside fuzz/ that need a child process
//	child_test.go          the child-process plumbing of the kill -9 and I/O error tests
//	format_test.go         the log's on-disk format, to cut and forge entries
//	helpers_test.go        drains, clocks, directory images, scratch directories
//	seeds_test.go          the seed corpora under testdata/fuzz/ (WALQ_WRITE_SEEDS=1)
//	ci.sh                  the short run for CI
//
// README.md lists the commands, short (CI) and long, and the figures they
// produce.
//
// # What the file-system tests prove
//
// The power-loss and fault tests put a file system behind the log's and
// the snapshots' seam (wal.FS) and decide what survived from the calls it
// received, never from walq's own accounting:
//
//   - internal/crashfs keeps a file's bytes as they were when it was
//     fsynced, and a directory's names as they were when it was fsynced;
//     everything else may be lost, kept, torn, zeroed or holed in a crash
//     state. TestPowerLoss crashes its workload at every durable operation
//     it reaches and judges each state by what the callers were told: an
//     Enqueue or Ack that returned nil under SyncAlways survives; under
//     SyncInterval and SyncNever, what a Compact or Close that returned nil
//     covered; in every mode the log is cut at one point.
//     TestPowerLossCatchesPlantedBugs shows that it fails when commits
//     complete before their fsync, when the directory fsync after a roll is
//     left out, or when sealed segments are counted on tidwall/wal's own
//     fsync (internal/testhook.PlantLogBug).
//   - internal/faultfs fails the Nth open, write, fsync, truncate, rename,
//     remove, mkdir, directory fsync, or tidwall/wal batch write or front
//     truncation. TestFaultEveryStep runs every N of a fixed workload: the
//     caller gets the error, a failed log refuses later writes, and a
//     reopen holds everything acknowledged.
//
// tidwall/wal writes its segments with package os, out of the seam's
// sight; those tests therefore also prove that walq itself fsyncs, through
// the seam, everything it counts durable. The kill -9 tests (kill9_test.go,
// ioerror_test.go's children) stay: they exercise the real kernel.
//
// # Concurrency
//
// An Oracle is not safe for concurrent use; feed it from one goroutine (the
// kill -9 parent reads the child's report stream in one).
package fuzz
