package wal

import "github.com/walq/walq/internal/testhook"

// plantedBug is a durability bug a crash test plants, through
// internal/testhook, to show that the test catches it. Production code
// never sets one.
type plantedBug uint8

const (
	bugNone          plantedBug = iota
	bugEarlyDurable             // commits complete before the fsync that covers them returns
	bugNoRollDirSync            // no directory fsync after a segment roll
	bugNoSealSync               // sealed segments counted durable on tidwall/wal's own fsync
)

var plantedBugs = map[string]plantedBug{
	"early-durable":    bugEarlyDurable,
	"no-roll-dir-sync": bugNoRollDirSync,
	"no-seal-sync":     bugNoSealSync,
}

func init() {
	testhook.PlantLogBug = func(opts any, name string) {
		b, ok := plantedBugs[name]
		if !ok {
			panic("wal: no planted bug named " + name)
		}
		opts.(*Options).plant = b
	}
}
