package redisq

import (
	_ "embed"

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
)

// The scripts, each with the shared head. go-redis runs them by SHA and
// falls back to the source when the server's script cache was emptied
// (restart, failover).
var (
	scriptEnqueue   = redis.NewScript(commonLua + enqueueLua)
	scriptDequeue   = redis.NewScript(commonLua + dequeueLua)
	scriptSettle    = redis.NewScript(commonLua + settleLua)
	scriptHousekeep = redis.NewScript(commonLua + housekeepLua)
	scriptDead      = redis.NewScript(commonLua + deadLua)
	scriptInspect   = redis.NewScript(commonLua + inspectLua)
)
