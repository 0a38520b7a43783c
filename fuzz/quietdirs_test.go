package fuzz_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestQuietDirsWaitsForEach: quietDirs returns only once every directory
// has stayed the same for its quiet span, the one that settles last
// included, and returns what each holds then; a directory that never
// settles fails it.
func TestQuietDirsWaitsForEach(t *testing.T) {
	quiet, busy := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(quiet, "f"), []byte("still"), 0o644); err != nil {
		t.Fatal(err)
	}
	const writes = 25 // every 20ms: the busy directory settles after ~500ms
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= writes; i++ {
			if err := os.WriteFile(filepath.Join(busy, "f"), []byte(fmt.Sprint(i)), 0o644); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	imgs, err := quietDirs([]string{quiet, busy})
	took := time.Since(start)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(imgs[1]["f"]); got != fmt.Sprint(writes) {
		t.Errorf("the busy directory read as %q, want its last write %d (returned after %v)", got, writes, took)
	}
	if got := string(imgs[0]["f"]); got != "still" {
		t.Errorf("the quiet directory read as %q", got)
	}
	if min := 20*(writes-1)*time.Millisecond + 300*time.Millisecond; took < min {
		t.Errorf("returned after %v, before the busy directory's quiet span could pass (%v)", took, min)
	}
}

// TestQuietDirsFailsOnADirectoryThatKeepsChanging: its deadline fails
// quietDirs, naming the directory, while another is quiet. The deadline
// is 1 s here (quietDirs' own is 5 s): more than three quiet spans, so
// that the quiet directory settles well within it.
func TestQuietDirsFailsOnADirectoryThatKeepsChanging(t *testing.T) {
	quiet, busy := t.TempDir(), t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := os.WriteFile(filepath.Join(busy, "f"), []byte(fmt.Sprint(i)), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	_, err := quietDirsWithin([]string{quiet, busy}, time.Second)
	close(stop)
	wg.Wait()
	if err == nil || !strings.Contains(err.Error(), busy) {
		t.Fatalf("quietDirs on a directory written every 20ms: %v, want an error naming %s", err, busy)
	}
}
