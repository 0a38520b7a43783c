package redisq

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/walq/walq/queue"
)

// checkServer refuses a server that cannot keep the durability mode asks
// for, saying what to change. It reads the queue's master (primary),
// looked up again for each send: a read that meets a failover rides it
// (rideAgain) and reads the replica that took over.
func (h *handle) checkServer(ctx context.Context, mode queue.SyncMode) error {
	cfg := map[string]string{}
	for _, p := range []string{"appendonly", "appendfsync", "maxmemory-policy"} {
		var v map[string]string
		err := h.rideAgain(ctx, func(ctx context.Context) (err error) {
			v, err = h.primary(ctx).ConfigGet(ctx, p).Result()
			return err
		})
		switch {
		case refusesConfig(err):
			return fmt.Errorf("%w: redisq: cannot read the server's %s (%w); set Options.TrustServer "+
				"if the server is known to keep Options.Sync", queue.ErrInvalidOptions, p, err)
		case err != nil: // not reached, not let in, or busy: TrustServer would not help
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

// refusesConfig reports whether err is the server's reply refusing
// CONFIG GET itself (NOPERM from the ACL, a renamed or disabled command,
// a proxy that does not pass it on), which Options.TrustServer works
// around. A reply that refuses the client (NOAUTH, WRONGPASS, too many
// clients) or says the server cannot serve now (LOADING, BUSY,
// MASTERDOWN, CLUSTERDOWN, TRYAGAIN) would refuse the commands after it
// too; it is not one, nor is a connection's or the context's error.
func refusesConfig(err error) bool {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) {
		return false
	}
	return !redis.IsAuthError(err) && !redis.IsMaxClientsError(err) && !redis.IsLoadingError(err) &&
		!redis.HasErrorPrefix(err, "BUSY ") && !redis.IsMasterDownError(err) && !redis.IsClusterDownError(err) &&
		!redis.IsTryAgainError(err)
}
