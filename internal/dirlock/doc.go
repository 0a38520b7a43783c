// Package dirlock is the advisory lock that keeps two processes from
// writing one directory: an exclusive lock for the writer, a shared one for
// readers that must not run beside it. It is the one lock implementation
// of walq; a queue directory has one lock file, named by Name.
//
// The lock is flock(2) on Linux, macOS and the BSDs and LockFileEx on
// Windows. Both are released by the kernel when the process dies, so a
// crashed writer never leaves a directory locked. Other systems have no
// implementation: Acquire fails there rather than run unlocked.
//
// A Lock is held by one goroutine; Release it once.
package dirlock
