package wal_test

import (
	"fmt"
	"log"
	"os"

	"github.com/walq/walq/wal"
)

func ExampleLog() {
	dir, err := os.MkdirTemp("", "wal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir, nil) // defaults: SyncAlways, 4 MiB segments
	if err != nil {
		log.Fatal(err)
	}
	for _, msg := range []string{"enqueue a", "enqueue b", "ack a"} {
		_, commit, err := l.Append([]byte(msg)) // cheap: callers may hold their own lock
		if err != nil {
			log.Fatal(err)
		}
		if err := commit.Wait(); err != nil { // durable once Wait returns nil
			log.Fatal(err)
		}
	}

	r := l.NewReader(l.FirstLSN())
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err != nil { // io.EOF once caught up
			break
		}
		fmt.Println(lsn, string(rec))
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 1 enqueue a
	// 2 enqueue b
	// 3 ack a
}
