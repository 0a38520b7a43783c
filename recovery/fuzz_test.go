package recovery_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/walq/walq/recovery"
)

// FuzzDecode reads random bytes as a snapshot file: no panic, no
// allocation beyond a small constant (Decode slices its input; the
// constant covers the fuzzing engine's own), a file
// that decodes is the one Encode makes of its LSN and body, and Latest
// agrees with Decode.
//
//	go test ./recovery -run '^$' -fuzz '^FuzzDecode$' -fuzztime 10s
func FuzzDecode(f *testing.F) {
	f.Add(recovery.Encode(7, []byte("body")))
	f.Add(recovery.Encode(1<<40, nil))
	f.Add([]byte("WALQSNAP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var lsn uint64
		var body []byte
		var err error
		var a, z runtime.MemStats
		runtime.ReadMemStats(&a)
		lsn, body, err = recovery.Decode(b)
		runtime.ReadMemStats(&z)
		if n := z.TotalAlloc - a.TotalAlloc; n > 64<<10 {
			t.Fatalf("Decode of %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(recovery.Encode(lsn, body), b) {
			t.Fatalf("Encode(Decode(b)) != b")
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, recovery.Name(lsn)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		info, got, err := recovery.Latest(dir)
		if err != nil || info.LSN != lsn || !bytes.Equal(got, body) {
			t.Fatalf("Latest: %v, LSN %d, %d bytes; Decode said LSN %d, %d bytes", err, info.LSN, len(got), lsn, len(body))
		}
	})
}

// FuzzEncode checks that every LSN and body survive Encode and Decode, and
// that any single flipped bit is caught.
//
//	go test ./recovery -run '^$' -fuzz '^FuzzEncode$' -fuzztime 10s
func FuzzEncode(f *testing.F) {
	f.Add(uint64(1), []byte("x"), uint(0))
	f.Add(uint64(1<<63), []byte{}, uint(100))
	f.Fuzz(func(t *testing.T, lsn uint64, body []byte, bit uint) {
		b := recovery.Encode(lsn, body)
		got, gotBody, err := recovery.Decode(b)
		if err != nil || got != lsn || !bytes.Equal(gotBody, body) {
			t.Fatalf("Decode(Encode(%d, %d bytes)) = %d, %d bytes, %v", lsn, len(body), got, len(gotBody), err)
		}
		b[bit/8%uint(len(b))] ^= 1 << (bit % 8)
		if _, _, err := recovery.Decode(b); err == nil {
			t.Fatalf("a flipped bit %d went unnoticed", bit)
		}
	})
}
