package wal_test

import "sync"

// spawn runs f in a goroutine that wg waits for (sync.WaitGroup.Go, which
// needs Go 1.25, for the older releases go.mod admits).
func spawn(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		f()
	}()
}
