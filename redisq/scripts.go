package redisq

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/common.lua
	commonLua string
	//go:embed scripts/enqueue.lua
	enqueueLua string
	//go:embed scripts/dequeue.lua
	dequeueLua string
	//go:embed scripts/settle.lua
	settleLua string
	//go:embed scripts/housekeep.lua
	housekeepLua string
	//go:embed scripts/dead.lua
	deadLua string
	//go:embed scripts/inspect.lua
	inspectLua string
	//go:embed scripts/sorted.lua
	sortedLua string
	//go:embed scripts/sorted_ops.lua
	sortedOpsLua string
	//go:embed scripts/probe.lua
	probeLua string // both libraries' probe, after their heads (acl.go)
)

// function is one operation of a library.
type function struct {
	lib    *lib
	name   string // <library>_<operation>
	writes bool   // not flagged no-writes: it may change the queue
}

// The libraries: the ack queue's (the shared head once, then each
// operation as a function of its own) and the sorted queue's (its head,
// then one function taking the operation as an argument). A library's
// name carries a digest of its code, so a server holding the library of
// another version of this package runs that one for that version's
// handles, and this version's handles load and run their own: code and
// library always match.
var (
	library = newLibrary("walq", commonLua+probeLua, []libOp{
		// enqueue and dequeue are refused whole by a server past
		// maxmemory, not halfway through; what only ends or moves
		// messages may run there, so that acks can still free memory;
		// inspect writes nothing.
		{"enqueue", enqueueLua, ""},
		{"dequeue", dequeueLua, ""},
		{"settle", settleLua, "allow-oom"},
		{"housekeep", housekeepLua, "allow-oom"},
		{"dead", deadLua, "allow-oom"},
		{"inspect", inspectLua, "no-writes"},
		{"probe", "return probe(ARGV[5] == 'r')", "no-writes"}, // writes nothing, by the server's own check (probe.lua)
		{"writable", "return 1", "allow-oom"},                  // writes nothing; flagged as a writer, refused by a replica (writable.go)
	})
	// The sorted queue's operations, under three names: publish and pull
	// are refused whole past maxmemory, the others that write may run
	// there; stats and the listing of dead values write nothing, and run
	// on a ReadOnly handle (FCALL_RO).
	sortedLibrary = newLibrary("walq_sorted", sortedLua+probeLua, []libOp{
		{"grow", sortedOpsLua, ""},
		{"settle", sortedOpsLua, "allow-oom"},
		{"read", sortedOpsLua, "no-writes"},
		{"probe", "return probe(ARGV[8] == 'r')", "no-writes"},
		{"writable", "return 1", "allow-oom"},
	})

	fnEnqueue, fnDequeue, fnSettle = library.fn("enqueue"), library.fn("dequeue"), library.fn("settle")
	fnHousekeep, fnDead, fnInspect = library.fn("housekeep"), library.fn("dead"), library.fn("inspect")
	fnSortedGrow, fnSortedSettle   = sortedLibrary.fn("grow"), sortedLibrary.fn("settle")
	fnSortedRead                   = sortedLibrary.fn("read")
	fnProbe, fnSortedProbe         = library.fn("probe"), sortedLibrary.fn("probe")
	fnWritable, fnSortedWritable   = library.fn("writable"), sortedLibrary.fn("writable")
)

// lib is a library of functions, loaded with FUNCTION LOAD.
type lib struct {
	name string // <prefix>_<digest>
	code string // the source FUNCTION LOAD takes
	ops  []libOp
}

// libOp is one function of a library: its operation's name, its body,
// and its flags (see FUNCTION LOAD).
type libOp struct{ op, body, flags string }

func newLibrary(prefix, head string, ops []libOp) *lib {
	var body strings.Builder
	body.WriteString(head)
	for _, o := range ops {
		flags := "{}"
		if o.flags != "" {
			flags = "{'" + o.flags + "'}"
		}
		fmt.Fprintf(&body, "\nredis.register_function{function_name = LIB .. '_%s', flags = %s, callback = function(KEYS, ARGV)\nbind(KEYS, ARGV)\n%s\nend}\n", o.op, flags, o.body)
	}
	sum := sha1.Sum([]byte(body.String()))
	name := prefix + "_" + hex.EncodeToString(sum[:8])
	return &lib{name: name, code: "#!lua name=" + name + "\nlocal LIB = '" + name + "'\n" + body.String(), ops: ops}
}

// fn returns the library's function for op, which it must have.
func (l *lib) fn(op string) function {
	for _, o := range l.ops {
		if o.op == op {
			return function{lib: l, name: l.name + "_" + op, writes: o.flags != "no-writes"}
		}
	}
	panic("redisq: library " + l.name + " has no operation " + op)
}

// missing tells whether err says the server lacks the library: a new or
// restarted server without persistence, a new cluster master.
func missing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Function not found")
}

// load loads the library into the server c talks to; loading it again is
// harmless (the same name is the same code).
func (l *lib) load(ctx context.Context, c redis.Cmdable) error {
	if err := c.FunctionLoadReplace(ctx, l.code).Err(); err != nil {
		return fmt.Errorf("redisq: load the function library %s: %w", l.name, err)
	}
	return nil
}

// loadAll loads the library into every master rdb reaches, unless it is
// there already.
func (l *lib) loadAll(ctx context.Context, rdb redis.UniversalClient) error {
	each := func(ctx context.Context, c *redis.Client) error {
		have, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: l.name}).Result()
		if err == nil && len(have) > 0 {
			return nil
		}
		return l.load(ctx, c)
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, each)
	case *redis.Ring:
		return c.ForEachShard(ctx, each)
	case *redis.Client:
		return each(ctx, c)
	}
	return l.load(ctx, rdb)
}
