package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the binary units a size flag takes after its number,
// longest first, so that "KiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// sizeFlag is a flag of a whole number of bytes, with or without a binary
// unit: 4096, 4096B, 64KiB (or 64K), 4MiB (4M), 1GiB (1G). It refuses a
// size below min, and leaves n at 0 when the flag is not given.
type sizeFlag struct {
	n   int64 // bytes; 0 when not given
	min int64 // the least size taken
}

func (f *sizeFlag) String() string {
	if f == nil || f.n == 0 {
		return ""
	}
	return strconv.FormatInt(f.n, 10)
}

func (f *sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if n < f.min {
		return fmt.Errorf("%d bytes is below %d", n, f.min)
	}
	f.n = n
	return nil
}

// parseSize reads a whole number of bytes with an optional binary unit.
func parseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size in bytes (4096, 64KiB, 4MiB, 1GiB)", s)
	}
	return n * mult, nil
}
