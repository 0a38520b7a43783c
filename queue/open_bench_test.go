package queue_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/walq/walq/queue"
)

// BenchmarkOpenAfterCrash measures the open of a queue whose process died
// without closing it, up to its first delivery: 16 MiB of payloads
// enqueued one at a time under SyncNever, under the default SnapshotBytes,
// so the open replays every record. Each open is of a fresh copy of the
// crash image, made untimed and fsynced, so that its pages are clean as a
// crash leaves the segments its rolls fsynced. Run with -benchmem: the
// bytes a replay allocates per open.
func BenchmarkOpenAfterCrash(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			image := crashedBacklog(b, 16<<20/size, size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				dir := syncedCopy(b, image)
				b.StartTimer()
				q, err := queue.Open(dir, &queue.Options{Sync: queue.SyncNever})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := q.TryDequeue(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if r := q.Recovery(); r.Clean || r.Replayed < 16<<20/size {
					b.Fatalf("open replayed %d records, clean %v: not an open after a crash", r.Replayed, r.Clean)
				}
				if err := q.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// crashedBacklog returns the crash image of a SyncNever queue holding n
// messages of size bytes, enqueued one at a time.
func crashedBacklog(b *testing.B, n, size int) string {
	src := b.TempDir()
	q, err := queue.Open(src, &queue.Options{Sync: queue.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	payload := make([]byte, size)
	for range n {
		if _, err := q.Enqueue(context.Background(), payload); err != nil {
			b.Fatal(err)
		}
	}
	return crashImage(b, src)
}

// syncedCopy copies the directory src (crashImage) and fsyncs every file
// of the copy.
func syncedCopy(b *testing.B, src string) string {
	dst := crashImage(b, src)
	err := filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return syncFile(path)
	})
	if err != nil {
		b.Fatal(err)
	}
	return dst
}

// syncFile fsyncs the file at path.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
