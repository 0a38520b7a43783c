package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFdatasync measures what one durable write costs on the disk
// under -dir's default (the system's temporary directory) by how the
// write meets the file: appended (the file grows, as walq's segments and
// the fsync loop do), written into blocks fallocate reserved (the size is
// set, the blocks are unwritten), or written over blocks already written
// (zeros written and synced beforehand). Each op is one pwrite of size
// bytes and one fdatasync. It tells what bounds every durable row of the
// harness: an fdatasync that must also commit a new file size or convert
// an extent costs more than one that carries only the data.
func BenchmarkFdatasync(b *testing.B) {
	for _, size := range []int{128, 4200} {
		for _, kind := range []string{"append", "fallocated", "overwrite"} {
			b.Run(fmt.Sprintf("%s/size=%d", kind, size), func(b *testing.B) {
				benchFdatasync(b, kind, size)
			})
		}
	}
}

func benchFdatasync(b *testing.B, kind string, size int) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	total := int64(b.N) * int64(size)
	if err := prepareFdatasync(f, kind, total); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	fd := int(f.Fd())
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := unix.Pwrite(fd, buf, int64(i)*int64(size)); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// prepareFdatasync readies total bytes of f for the kind of write.
func prepareFdatasync(f *os.File, kind string, total int64) error {
	fd := int(f.Fd())
	switch kind {
	case "append":
		return nil
	case "fallocated":
		if err := unix.Fallocate(fd, 0, 0, total); err != nil {
			return err
		}
	case "overwrite":
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < total; off += int64(len(zeros)) {
			if _, err := unix.Pwrite(fd, zeros, off); err != nil {
				return err
			}
		}
	}
	return unix.Fsync(fd)
}
