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
//	powerloss_test.go      on-disk states a power loss can leave (unsynced suffix torn or dropped)
//	tail_test.go           every byte offset of the last entries cut, zeroed, extended
//	damage_test.go         mid-log and snapshot damage: ErrCorrupt with location, or salvage
//	snapstep_test.go       a crash at each step of a snapshot and of the log truncation after it
//	ioerror_test.go        writes failing (RLIMIT_FSIZE, a full tmpfs): errors are sticky
//	move_crash_test.go     a crash between a compaction's copies and its cursor advance
//	fuzz_test.go           go test -fuzz targets: segments, snapshots, operation sequences
//	model_test.go          the in-memory model of the ack queue the sequences run against
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
// # Concurrency
//
// An Oracle is not safe for concurrent use; feed it from one goroutine (the
// kill -9 parent reads the child's report stream in one).
package fuzz
