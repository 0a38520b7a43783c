package redisq

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/checks.lua
	checksLua string // both libraries' checks of a call's keys, before their heads
	//go:embed scripts/common.lua
	commonLua string
	//go:embed scripts/enqueue.lua
	enqueueLua string
	//go:embed scripts/enqueue1.lua
	enqueue1Lua string
	//go:embed scripts/ack1.lua
	ack1Lua string
	//go:embed scripts/lease1.lua
	lease1Lua string
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
	keys   []int  // the indexes of the queue's keys its calls carry, in order; nil: all
}

// pick returns the keys of a call of f from all the queue's keys.
func (f function) pick(all []string) []string {
	if f.keys == nil {
		return all
	}
	ks := make([]string, len(f.keys))
	for i, k := range f.keys {
		ks[i] = all[k]
	}
	return ks
}

// The libraries: the ack queue's (the shared head once, then each
// operation as a function of its own) and the sorted queue's (its head,
// then one function taking the operation as an argument), each with the
// checks of a call's keys before its head and the probe after it. A
// library's name carries a digest of its code, so a server holding the
// library of another version of this package runs that one for that
// version's handles, and this version's handles load and run their own:
// code and library always match.
var (
	library = newLibrary("walq", checksLua+commonLua+probeLua, []libOp{
		// enqueue and dequeue are refused whole by a server past
		// maxmemory, not halfway through; what only ends or moves
		// messages may run there, so that acks can still free memory;
		// inspect writes nothing.
		// The functions that run for each message or few (Dequeues,
		// lone or gathered; acks by receipt, lone or gathered; enqueues
		// of generated ids ready at once, lone, gathered or a small
		// batch) are called with only the keys they touch (positions in
		// scripts/common.lua's order) and the arguments they use: seq,
		// msg, ready and lease for an enqueue, and acked with a
		// DedupWindow; msg, ready, delayed and lease for the leases of
		// Dequeues; msg, lease, acked and stats for acks.
		{"enqueue", guarded(enqueueLua), "", nil},
		{"enqueue1", enqueue1Lua, "", []int{1, 2, 3, 5}},
		{"enqueue1w", enqueue1Lua, "", []int{1, 2, 3, 5, 7}},
		{"dequeue", guarded(dequeueLua), "", nil},
		{"lease1", lease1Lua, "", []int{2, 3, 4, 5}},
		{"settle", guarded(settleLua), "allow-oom", nil},
		{"ack1", ack1Lua, "allow-oom", []int{2, 5, 7, 8}},
		{"housekeep", guarded(housekeepLua), "allow-oom", nil},
		{"dead", guarded(deadLua), "allow-oom", nil},
		{"inspect", guarded(inspectLua), "no-writes", nil},
		// probe writes nothing, by the server's own check (probe.lua);
		// once the ACL passes, Open looks for lost keys with it.
		{"probe", "local s = probe(ARGV[5] == 'r') if s ~= '' then return s end return intact() or ''", "no-writes", nil},
		{"writable", "return 1", "allow-oom", nil}, // writes nothing; flagged as a writer, refused by a replica (writable.go)
	})
	// The sorted queue's operations, under three names: publish and pull
	// are refused whole past maxmemory, the others that write may run
	// there; stats and the listing of dead values write nothing, and run
	// on a ReadOnly handle (FCALL_RO).
	sortedLibrary = newLibrary("walq_sorted", checksLua+sortedLua+probeLua, []libOp{
		{"grow", sortedOpsLua, "", nil},
		{"settle", sortedOpsLua, "allow-oom", nil},
		{"read", sortedOpsLua, "no-writes", nil},
		{"probe", "return probe(ARGV[8] == 'r')", "no-writes", nil},
		{"writable", "return 1", "allow-oom", nil},
	})

	fnEnqueue, fnDequeue, fnSettle = library.fn("enqueue"), library.fn("dequeue"), library.fn("settle")
	fnEnqueue1, fnEnqueue1W        = library.fn("enqueue1"), library.fn("enqueue1w")
	fnLease1, fnAck1               = library.fn("lease1"), library.fn("ack1")
	fnHousekeep, fnDead, fnInspect = library.fn("housekeep"), library.fn("dead"), library.fn("inspect")
	fnSortedGrow, fnSortedSettle   = sortedLibrary.fn("grow"), sortedLibrary.fn("settle")
	fnSortedRead                   = sortedLibrary.fn("read")
	fnProbe, fnSortedProbe         = library.fn("probe"), sortedLibrary.fn("probe")
	fnWritable, fnSortedWritable   = library.fn("writable"), sortedLibrary.fn("writable")
)

// guarded returns the body of an ack queue's function that first checks
// that none of the call's keys that hold a placeholder was deleted, nor
// holds another layout's mark (intact, scripts/common.lua), and returns
// that function's error reply when one was.
func guarded(body string) string {
	return "do local bad = intact() if bad then return bad end end\n" + body
}

// lib is a library of functions, loaded with FUNCTION LOAD.
type lib struct {
	name string // <prefix>_<digest>
	code string // the source FUNCTION LOAD takes
	ops  []libOp
}

// libOp is one function of a library: its operation's name, its body,
// its flags (see FUNCTION LOAD) and, if its calls carry only some of the
// queue's keys, their positions (1 for the first key), in order.
type libOp struct {
	op, body, flags string
	keys            []int
}

// binding is the Lua that binds a call of o (scripts/common.lua): bind,
// or with some keys bindsome, given each of the library's nkeys keys at
// its position, nil where the call lacks it (the body then binds its
// arguments).
func (o libOp) binding(nkeys int) string {
	if o.keys == nil {
		return "bind(KEYS, ARGV)"
	}
	at := make([]string, nkeys)
	for i := range at {
		at[i] = "nil"
	}
	for j, p := range o.keys {
		at[p-1] = fmt.Sprintf("KEYS[%d]", j+1)
	}
	return "bindsome(" + strings.Join(at, ", ") + ")"
}

func newLibrary(prefix, head string, ops []libOp) *lib {
	var body strings.Builder
	body.WriteString(head)
	for _, o := range ops {
		flags := "{}"
		if o.flags != "" {
			flags = "{'" + o.flags + "'}"
		}
		fmt.Fprintf(&body, "\nredis.register_function{function_name = LIB .. '_%s', flags = %s, callback = function(KEYS, ARGV)\n%s\n%s\nend}\n",
			o.op, flags, o.binding(len(ackTypes)), o.body)
	}
	sum := sha1.Sum([]byte(body.String()))
	name := prefix + "_" + hex.EncodeToString(sum[:8])
	return &lib{name: name, code: "#!lua name=" + name + "\nlocal LIB = '" + name + "'\n" + body.String(), ops: ops}
}

// fn returns the library's function for op, which it must have.
func (l *lib) fn(op string) function {
	for _, o := range l.ops {
		if o.op == op {
			f := function{lib: l, name: l.name + "_" + op, writes: o.flags != "no-writes"}
			for _, p := range o.keys {
				f.keys = append(f.keys, p-1)
			}
			return f
		}
	}
	panic("redisq: library " + l.name + " has no operation " + op)
}

// errFunctionMissing is the server's whole reply to an FCALL of a
// function it does not have.
const errFunctionMissing = "ERR Function not found"

// missing tells whether err is the server's reply that it lacks the
// library: a new or restarted server without persistence, a new cluster
// master. Only that exact reply counts: an error a function raised, or a
// client's own, that has those words in it is no missing library.
func missing(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && re.Error() == errFunctionMissing
}

// load loads the library into the server c talks to; loading it again is
// harmless (the same name is the same code), so a load whose connection
// dropped is sent again (sendAgain).
func (l *lib) load(ctx context.Context, c redis.Cmdable) error {
	if err := sendAgain(ctx, func() error { return c.FunctionLoadReplace(ctx, l.code).Err() }); err != nil {
		return fmt.Errorf("redisq: load the function library %s: %w", l.name, err)
	}
	return nil
}

// loadAll loads the library l into every master the handle's client
// reaches, unless it is there already; a load that meets a failover
// (a master that died, until the client's map of the slots names its
// replica) is done again, over the masters of the map then (rideAgain).
func (h *handle) loadAll(ctx context.Context, l *lib) error {
	return h.rideAgain(ctx, func(ctx context.Context) error { return l.loadAll(ctx, h.rdb) })
}

// loadAll loads the library into every master rdb reaches, unless it is
// there already.
func (l *lib) loadAll(ctx context.Context, rdb redis.UniversalClient) error {
	each := func(ctx context.Context, c *redis.Client) error {
		var have []redis.Library
		err := sendAgain(ctx, func() (err error) {
			have, err = c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: l.name}).Result()
			return err
		})
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
