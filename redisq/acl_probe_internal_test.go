package redisq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/walq/walq/queue"
	"github.com/walq/walq/redisq/internal/redistest"
)

// TestACLSelectorHSETFlight: a user granted HSET (by a selector) on
// every key of a sorted queue but flight, which flights() writes with
// HSET when a count is garbled, is refused by Open, naming HSET on
// flight: Open runs each command on each key the functions run it on.
func TestACLSelectorHSETFlight(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := "walq:{uses}:s:"
	sel := "(+hset"
	for _, k := range []string{"val", "vinfo", "vreason", "pos", "batch"} {
		sel += " ~" + p + k
	}
	sel += ")"
	rdb := aclUser(t, srv, "+@all", "-hset", sel)
	_, err := OpenSorted[string](ctx, rdb, "uses", &SortedOptions{Options: Options{TrustServer: true, ManualRequeue: true}})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.ErrorContains(t, err, "HSET on "+p+"flight")
}

// TestACLProbeSelectorHDEL: a user granted HDEL on msg only (a
// selector), the one key the ack functions run HDEL on, is accepted by
// Open, which leaves nothing behind, and runs the queue whole.
func TestACLProbeSelectorHDEL(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := aclUser(t, srv, "+@all", "-hdel", "(+hdel ~walq:{raise}:2:msg)")
	admin := srv.Client()
	q, err := Open(ctx, rdb, "raise", &Options{TrustServer: true})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	n, err := admin.Exists(ctx, q.keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "Open of a new queue creates no key")
	aclRunAck(t, rdb, "raise")
}

// TestACLProbeNotifies: the check of the ACL on a live queue of each
// kind changes nothing a watcher sees: no keyspace event of its keys, no
// message on its channel. The handles are closed first, so that nothing
// but the check runs; a message published after it ends what is read.
func TestACLProbeNotifies(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(t, rdb.ConfigSet(ctx, "notify-keyspace-events", "KA").Err())
	opts := Options{TrustServer: true, DedupWindow: time.Hour}
	q, err := Open(ctx, rdb, "live", &opts)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, []byte("x"), queue.WithID("a"))
	require.NoError(t, err)
	_, err = q.TryDequeue()
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err := OpenSorted[string](ctx, rdb, "live-sorted", &SortedOptions{Options: opts})
	require.NoError(t, err)
	require.NoError(t, s.Publish(ctx, "a", "k1", []byte("v1")))
	require.NoError(t, s.Close())

	for _, c := range []struct {
		h    *handle
		f    function
		argv []any
	}{
		{q.handle, fnProbe, []any{q.wake, unixMicros(time.Now()), 0, 0}},
		{s.handle, fnSortedProbe, []any{s.wake, unixMicros(time.Now()), 0, 0, 0, 0, "probe"}},
	} {
		tag := c.h.keys[0][:strings.Index(c.h.keys[0], "}")+1]
		sub := srv.Client().PSubscribe(ctx, "__keyspace@0__:"+tag+"*", c.h.wake)
		_, err = sub.Receive(ctx)
		require.NoError(t, err)
		_, err = sub.Receive(ctx)
		require.NoError(t, err)
		require.NoError(t, c.h.checkACL(ctx, c.f, c.argv, false))
		require.NoError(t, rdb.Publish(ctx, c.h.wake, "end").Err())
		var seen []string
		for {
			m, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			if m.Channel == c.h.wake && m.Payload == "end" {
				break
			}
			seen = append(seen, m.Channel+" "+m.Payload)
		}
		require.NoError(t, sub.Close())
		require.Empty(t, seen, "what the check of %s's ACL raised", tag)
	}
}

// TestACLProbeEncoding: a sorted queue's small hashes are listpacks; the
// probe of a second Open converts none.
func TestACLProbeEncoding(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	s, err := OpenSorted[string](ctx, rdb, "enc", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, rdb.ConfigSet(ctx, "hash-max-listpack-entries", "128").Err()) // Redis's documented default
	for i := range 128 {
		require.NoError(t, s.Publish(ctx, "a", fmt.Sprint("k", i), []byte("v")))
	}
	enc := func() map[string]string {
		out := map[string]string{}
		for _, k := range s.keys {
			e, err := rdb.ObjectEncoding(ctx, k).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			require.NoError(t, err)
			out[k] = e
		}
		return out
	}
	before := enc()
	s2, err := OpenSorted[string](ctx, rdb, "enc", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	s2.Close()
	t.Logf("before %v", before)
	require.Equal(t, before, enc())
}

// TestACLSelectorZADD: a user granted ZSCORE, ZADD and ZREM (by a
// selector) on every key of an ack queue but acked, which an ack writes
// with ZADD and the housekeeper with ZREM, is refused by Open, naming one
// of them on acked, before any enqueue could strand a message.
func TestACLSelectorZADD(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	p := "walq:{free}:2:"
	zs, za := "(+zscore", "(+zadd +zrem"
	for _, k := range []string{"ready", "delayed", "lease", "dead"} {
		zs += " ~" + p + k
		za += " ~" + p + k
	}
	rdb := aclUser(t, srv, "+@all", "-zscore", "-zadd", "-zrem", zs+")", za+")")
	_, err := Open(ctx, rdb, "free", &Options{TrustServer: true, DedupWindow: time.Hour})
	require.ErrorIs(t, err, queue.ErrInvalidOptions)
	require.Regexp(t, `\b(ZADD|ZREM) on `+regexp.QuoteMeta(p+"acked"), err.Error())
}

// TestACLProbeLoadsLibrary: the check of the ACL loads the library where
// the server lacks it (flushed after Open loaded it), as every call does.
func TestACLProbeLoadsLibrary(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	q, err := Open(ctx, rdb, "flushed", &Options{TrustServer: true})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, rdb.FunctionFlush(ctx).Err())
	require.NoError(t, q.checkACL(ctx, fnProbe, []any{q.wake, 0, 0, 0}, false))
}

// TestACLUsesFromSource derives from each library's source the pairs of
// a command and the key position it runs on (PUBLISH: position 0, the
// channel) and compares them with the library's USES, which the probe
// checks: a command a function runs on a key that USES lacks is one an
// ACL may refuse after the function's first write. It reads the code
// each library loads (scripts.go) but the probe, which runs USES itself.
// A call whose command or key this reading cannot resolve fails the
// test, to be taught here, and so does any use of redis.call,
// redis.pcall or pcall it cannot read (an alias, a call split over
// lines, a pcall of a function value).
func TestACLUsesFromSource(t *testing.T) {
	for name, l := range map[string]*lib{"ack": library, "sorted": sortedLibrary} {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, l.code, probeLua)
			src := readLua(strings.Replace(l.code, probeLua, "", 1))
			src.parseHead(t)
			got := src.derive(t)
			require.Equal(t, positions(src.uses), positions(got), "USES (want) against the commands the source runs (got)")
		})
	}
}

// luaSource is a library's source, comments cut, read for TestACLUsesFromSource.
type luaSource struct {
	lines   []string
	funcs   map[string]bool   // the names of its local functions
	pos     map[string]int    // K_ name -> key position, from bind
	types   map[string][]int  // key type -> its positions, from TYPES
	counter []int             // the positions of COUNTERS
	uses    map[string][]bool // from USES: command -> position -> listed
}

// readLua reads a library's code, comments cut.
func readLua(code string) *luaSource {
	s := &luaSource{funcs: map[string]bool{}, pos: map[string]int{"CHAN": 0}}
	for _, l := range strings.Split(code, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		if m := luaFunc.FindStringSubmatch(l); m != nil {
			s.funcs[m[1]] = true
		}
		s.lines = append(s.lines, l)
	}
	return s
}

var (
	luaBind     = regexp.MustCompile(`^\s*((?:K_\w+, )*K_\w+) = ((?:KEYS\[\d+\], )*KEYS\[\d+\])`)
	luaCall     = regexp.MustCompile(`redis\.p?call\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*[,)]`)
	luaRedis    = regexp.MustCompile(`\bredis\b(\.(?:p?call\(|\w+))?`)
	luaPcall    = regexp.MustCompile(`(?:^|[^.\w])pcall\b(?:\s*\(\s*([\w.]+)\s*,)?`)
	luaArgSep   = regexp.MustCompile(`\s*,\s*`)
	luaFunc     = regexp.MustCompile(`^\s*local function (\w+)\(([^)]*)\)`)
	luaForList  = regexp.MustCompile(`for _, (\w+) in ipairs\(\{([^}]*)\}\)`)
	luaUsesItem = regexp.MustCompile(`\{'([A-Z]+)'(?:, \{([\d, ]+)\})?\}`)
	luaPair     = regexp.MustCompile(`\{'([A-Z]+)', (K_\w+)\}`)
	luaStep     = regexp.MustCompile(`step\('([A-Z]+)', (K_\w+), [^,]+, [^,]+, '([A-Z]+)'`)
)

// parseHead reads bind, TYPES, COUNTERS and USES.
func (s *luaSource) parseHead(t *testing.T) {
	t.Helper()
	text := strings.Join(s.lines, "\n")
	for _, l := range s.lines {
		if m := luaBind.FindStringSubmatch(l); m != nil {
			names, keys := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
			for i, n := range names {
				s.pos[n], _ = strconv.Atoi(strings.Trim(keys[i], "KEYS[]"))
			}
		}
	}
	block := func(name string) string {
		from := strings.Index(text, "local "+name+" = {")
		require.GreaterOrEqual(t, from, 0, name)
		rest := text[from:]
		return rest[:strings.Index(rest, "\n}")+2]
	}
	s.types = map[string][]int{}
	typesLine := text[strings.Index(text, "local TYPES = {"):]
	for i, ty := range regexp.MustCompile(`'(\w+)'`).FindAllStringSubmatch(typesLine[:strings.Index(typesLine, "}")], -1) {
		s.types[ty[1]] = append(s.types[ty[1]], i+1)
	}
	for _, m := range regexp.MustCompile(`local COUNTERS = \{\[(\d+)\]`).FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		s.counter = append(s.counter, n)
	}
	s.uses = map[string][]bool{}
	for _, m := range luaUsesItem.FindAllStringSubmatch(block("USES"), -1) {
		if m[2] == "" {
			s.add(s.uses, m[1], 0)
		}
		for _, p := range strings.Split(m[2], ", ") {
			if n, err := strconv.Atoi(p); err == nil {
				s.add(s.uses, m[1], n)
			}
		}
	}
}

func (s *luaSource) add(to map[string][]bool, cmd string, pos int) {
	if to[cmd] == nil {
		to[cmd] = make([]bool, len(s.types["string"])+len(s.types["hash"])+len(s.types["zset"])+1)
	}
	to[cmd][pos] = true
}

// derive resolves every redis.call and redis.pcall of the source.
func (s *luaSource) derive(t *testing.T) map[string][]bool {
	got := map[string][]bool{}
	inProbes := ""
	for i, l := range s.lines {
		if strings.HasPrefix(l, "local PROBES = {") {
			inProbes = "in"
		} else if inProbes == "in" && strings.HasPrefix(l, "}") {
			inProbes = "done"
		}
		require.Empty(t, s.unread(l), "line %d: %s", i, l)
		for _, m := range luaCall.FindAllStringSubmatch(l, -1) {
			cmd, key := m[1], m[2]
			switch {
			case inProbes == "in": // PROBES read any key of their type
				ty := strings.TrimSpace(l[:strings.Index(l, "=")])
				for _, p := range s.types[ty] {
					s.add(got, strings.Trim(cmd, "'"), p)
				}
			case key == "keys[i]": // checks reads COUNTERS
				for _, p := range s.counter {
					s.add(got, strings.Trim(cmd, "'"), p)
				}
			case cmd == "u[1]": // publish's undo: step's back commands and the literal pairs
				for _, m := range luaPair.FindAllStringSubmatch(strings.Join(s.lines, "\n"), -1) {
					s.add(got, m[1], s.pos[m[2]])
				}
				for _, m := range luaStep.FindAllStringSubmatch(strings.Join(s.lines, "\n"), -1) {
					s.add(got, m[3], s.pos[m[2]])
				}
			default:
				for _, pr := range s.resolve(t, cmd, key, i, 0) {
					s.add(got, pr.cmd, pr.pos)
				}
			}
		}
	}
	return got
}

// unread says what on line l derive cannot read, or "": a use of redis
// but a call luaCall reads whole (its command and key on the line) or a
// reply helper; a pcall of anything but a local function (a call of it,
// which resolve reads) or a library's function (cmsgpack.unpack).
func (s *luaSource) unread(l string) string {
	calls := 0
	for _, m := range luaRedis.FindAllStringSubmatch(l, -1) {
		switch m[1] {
		case ".call(", ".pcall(":
			calls++
		case ".error_reply", ".status_reply", ".register_function":
		default:
			return "redis" + m[1] + ", not a call"
		}
	}
	if n := len(luaCall.FindAllString(l, -1)); n != calls {
		return fmt.Sprintf("%d of %d calls read", n, calls)
	}
	for _, m := range luaPcall.FindAllStringSubmatch(l, -1) {
		if f := m[1]; f == "" || !s.funcs[f] && !strings.Contains(f, ".") {
			return "pcall of " + f
		}
	}
	return ""
}

// positions lists each command's positions.
func positions(m map[string][]bool) map[string][]int {
	out := map[string][]int{}
	for c, ps := range m {
		for p, on := range ps {
			if on {
				out[c] = append(out[c], p)
			}
		}
	}
	return out
}

type luaUse struct {
	cmd string
	pos int
}

// resolve returns the pairs a call of cmd on key at line i runs: literal
// ones, a key of a for loop over a list of keys, or a parameter of the
// enclosing function, resolved at each of its calls.
func (s *luaSource) resolve(t *testing.T, cmd, key string, i, depth int) []luaUse {
	require.Less(t, depth, 5, "line %d: %s", i, s.lines[i])
	if strings.HasPrefix(cmd, "'") && !strings.HasPrefix(key, "K_") && key != "CHAN" {
		for j := i; j >= 0 && j > i-3; j-- {
			if m := luaForList.FindStringSubmatch(s.lines[j]); m != nil && m[1] == key {
				var out []luaUse
				for _, k := range strings.Split(m[2], ", ") {
					out = append(out, s.resolve(t, cmd, k, j, depth+1)...)
				}
				return out
			}
		}
	}
	if strings.HasPrefix(cmd, "'") {
		if p, ok := s.pos[key]; ok {
			return []luaUse{{strings.Trim(cmd, "'"), p}}
		}
	}
	fn, params := "", []string(nil)
	for j := i; j >= 0 && fn == ""; j-- {
		if m := luaFunc.FindStringSubmatch(s.lines[j]); m != nil {
			fn, params = m[1], strings.Split(m[2], ", ")
		}
	}
	require.NotEmpty(t, fn, "line %d: unresolved %s", i, s.lines[i])
	ci, ki := slices.Index(params, cmd), slices.Index(params, key)
	require.True(t, ki >= 0 && (ci >= 0 || strings.HasPrefix(cmd, "'")), "line %d: unresolved %s", i, s.lines[i])
	var out []luaUse
	call := regexp.MustCompile(`(?:\b` + fn + `\(|\bpcall\(\s*` + fn + `\s*,)\s*([^()]*)`)
	for j, l := range s.lines {
		if luaFunc.MatchString(l) && strings.Contains(l, "function "+fn+"(") {
			continue
		}
		for _, m := range call.FindAllStringSubmatch(l, -1) {
			args := luaArgSep.Split(m[1], -1)
			c := cmd
			if ci >= 0 {
				c = args[ci]
			}
			out = append(out, s.resolve(t, c, args[ki], j, depth+1)...)
		}
	}
	return out
}

// TestACLProbeCounterAtMax: only the ACL's refusal is one: a sequence
// counter at its largest value, which INCR would overflow, is no
// refusal of INCR, and Open goes on.
func TestACLProbeCounterAtMax(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(t, rdb.Set(ctx, "walq:{full}:2:seq", "9223372036854775807", 0).Err())
	// The placeholders a queue that enqueued holds (see intact): without
	// them, Open would take the counter for the last key left of a queue
	// whose others were deleted.
	keep := strings.Repeat("~", 256)
	require.NoError(t, rdb.HSet(ctx, "walq:{full}:2:msg", "", keep).Err())
	for _, k := range []string{"walq:{full}:2:ready", "walq:{full}:2:lease"} {
		require.NoError(t, rdb.ZAdd(ctx, k, redis.Z{Score: math.Inf(1), Member: keep}).Err())
	}
	q, err := Open(ctx, rdb, "full", &Options{TrustServer: true})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.Equal(t, "9223372036854775807", rdb.Get(ctx, "walq:{full}:2:seq").Val())
}

// TestACLProbeRefusesEachWrite pins the server's order the check of the
// ACL relies on (acl.go): in a function flagged no-writes, a write the
// ACL refuses is refused as such, not as a write. A user refused one
// write command of a library's USES is refused by Open, naming it.
func TestACLProbeRefusesEachWrite(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	writes := []string{"DECR", "HDEL", "HINCRBY", "HSET", "INCR", "INCRBY", "PUBLISH", "ZADD", "ZPOPMIN", "ZREM"}
	open := map[string]func(*redis.Client, string) error{
		"ack": func(rdb *redis.Client, name string) error {
			_, err := Open(ctx, rdb, name, &Options{TrustServer: true})
			return err
		},
		"sorted": func(rdb *redis.Client, name string) error {
			_, err := OpenSorted[string](ctx, rdb, name, &SortedOptions{Options: Options{TrustServer: true}})
			return err
		},
	}
	for kind, l := range map[string]*lib{"ack": library, "sorted": sortedLibrary} {
		src := readLua(l.code)
		src.parseHead(t)
		for _, c := range writes {
			if src.uses[c] == nil {
				continue
			}
			t.Run(kind+"/"+c, func(t *testing.T) {
				rdb := aclUser(t, srv, "+@all", "-"+strings.ToLower(c))
				err := open[kind](rdb, "each-"+kind+"-"+strings.ToLower(c))
				require.ErrorIs(t, err, queue.ErrInvalidOptions)
				require.ErrorContains(t, err, "refuses "+c+" on ")
			})
		}
	}
}

// TestACLProbeSeen pins what the package documentation says a watcher
// sees of the check of the ACL on a new queue of each kind: keymiss
// events of its keys, and each refused write counted as a rejected call
// of its command and as an error reply. The handles are closed first.
func TestACLProbeSeen(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	require.NoError(t, rdb.ConfigSet(ctx, "notify-keyspace-events", "KEAm").Err())
	q, err := Open(ctx, rdb, "seen", &Options{TrustServer: true})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	s, err := OpenSorted[string](ctx, rdb, "seen-sorted", &SortedOptions{Options: Options{TrustServer: true}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	writes := map[string]bool{"decr": true, "hdel": true, "hincrby": true, "hset": true, "incr": true,
		"incrby": true, "publish": true, "zadd": true, "zpopmin": true, "zrem": true}
	for _, c := range []struct {
		h    *handle
		f    function
		argv []any
	}{
		{q.handle, fnProbe, []any{q.wake, unixMicros(time.Now()), 0, 0}},
		{s.handle, fnSortedProbe, []any{s.wake, unixMicros(time.Now()), 0, 0, 0, 0, "probe"}},
	} {
		tag := c.h.keys[0][:strings.Index(c.h.keys[0], "}")+1]
		sub := srv.Client().PSubscribe(ctx, "__keyspace@0__:"+tag+"*", c.h.wake)
		for range 2 {
			_, err = sub.Receive(ctx)
			require.NoError(t, err)
		}
		require.NoError(t, rdb.ConfigResetStat(ctx).Err())
		require.NoError(t, c.h.checkACL(ctx, c.f, c.argv, false))
		info := rdb.Info(ctx, "errorstats", "stats", "commandstats").Val()
		require.NoError(t, rdb.Publish(ctx, c.h.wake, "end").Err())
		events := map[string]int{}
		for {
			m, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			if m.Channel == c.h.wake && m.Payload == "end" {
				break
			}
			events[m.Payload]++
		}
		require.NoError(t, sub.Close())
		require.Len(t, events, 1, "%s: %v", tag, events)
		require.Positive(t, events["keymiss"], tag)
		rejected, errs := 0, -1
		for _, l := range strings.Split(info, "\r\n") {
			if m := regexp.MustCompile(`^cmdstat_(\w+):.*rejected_calls=(\d+)`).FindStringSubmatch(l); m != nil && m[2] != "0" {
				require.True(t, writes[m[1]], "%s: %s", tag, l)
				n, _ := strconv.Atoi(m[2])
				rejected += n
			}
			if v, ok := strings.CutPrefix(l, "total_error_replies:"); ok {
				errs, _ = strconv.Atoi(v)
			}
		}
		t.Logf("%s: %d writes refused, %d keymiss events", tag, rejected, events["keymiss"])
		require.Positive(t, rejected, tag)
		require.Equal(t, rejected, errs, "%s: each refused write is one error reply", tag)
	}
}
