package redisq

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// checkServer refuses a server that cannot keep the durability mode asks
// for, saying what to change.
func checkServer(ctx context.Context, c redis.Cmdable, mode queue.SyncMode) error {
	cfg := map[string]string{}
	for _, p := range []string{"appendonly", "appendfsync", "maxmemory-policy"} {
		var v map[string]string
		err := sendAgain(ctx, func() (err error) { v, err = c.ConfigGet(ctx, p).Result(); return err })
		var refused redis.Error
		switch {
		case err != nil && errors.As(err, &refused): // the server answered: CONFIG not allowed
			return fmt.Errorf("%w: redisq: cannot read the server's %s (%w); set Options.TrustServer "+
				"if the server is known to keep Options.Sync", queue.ErrInvalidOptions, p, err)
		case err != nil: // not reached, or the connection failed: TrustServer would not help
			return fmt.Errorf("redisq: read the server's %s: %w", p, err)
		}
		cfg[p] = v[p]
	}
	if p := cfg["maxmemory-policy"]; p != "noeviction" {
		return fmt.Errorf("%w: redisq: the server has maxmemory-policy %s, which deletes keys under memory "+
			"pressure and so would lose queued messages; set it to noeviction (CONFIG SET maxmemory-policy "+
			"noeviction, and in redis.conf)", queue.ErrInvalidOptions, p)
	}
	aof, fsync := cfg["appendonly"], cfg["appendfsync"]
	switch {
	case mode == queue.SyncAlways && (aof != "yes" || fsync != "always"):
		return fmt.Errorf("%w: redisq: Options.Sync is SyncAlways but the server has appendonly %s, "+
			"appendfsync %s, so a crash of the server can lose writes that returned; set appendonly yes and "+
			"appendfsync always (CONFIG SET, and in redis.conf), or open with Sync: queue.SyncInterval "+
			"(appendfsync everysec) or TrustServer", queue.ErrInvalidOptions, aof, fsync)
	case mode == queue.SyncInterval && (aof != "yes" || (fsync != "always" && fsync != "everysec")):
		return fmt.Errorf("%w: redisq: Options.Sync is SyncInterval but the server has appendonly %s, "+
			"appendfsync %s; set appendonly yes and appendfsync everysec or always (CONFIG SET, and in "+
			"redis.conf), or open with Sync: queue.SyncNever or TrustServer", queue.ErrInvalidOptions, aof, fsync)
	}
	return nil
}
