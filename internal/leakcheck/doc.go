// Package leakcheck fails a test binary whose tests leave goroutines of the
// code under test running: a queue or log that a test opened and never
// closed keeps its background goroutines (housekeeper, committer, syncer)
// alive, and they go on using the CPU, the disk and the test's temporary
// directory while the next tests run.
//
// A package's TestMain calls Main with the import paths whose functions
// count as its own:
//
//	func TestMain(m *testing.M) {
//		leakcheck.Main(m, "github.com/walq/walq/queue", "github.com/walq/walq/wal")
//	}
//
// It reads the stacks of every goroutine (runtime.Stack), so it needs no
// dependency and works under -race.
//
// Main polls the stacks (every 20 ms, up to Grace) rather than waiting on
// a channel: a goroutine's end signals nothing that code outside its
// package can wait on. A passing run with nothing left pays no wait.
package leakcheck
