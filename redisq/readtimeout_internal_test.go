package redisq

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestReadTimeoutKinds: each kind of client says its read timeout in its
// own way (normalized or as given); readTimeout reads them all alike.
func TestReadTimeoutKinds(t *testing.T) {
	addr := "127.0.0.1:1" // never dialled
	for _, tc := range []struct {
		name    string
		rdb     redis.UniversalClient
		want    time.Duration
		bounded bool
	}{
		{"client default", redis.NewClient(&redis.Options{Addr: addr}), 5 * time.Second, true},
		{"client set", redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 7 * time.Second}), 7 * time.Second, true},
		{"client none", redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1}), 0, false},
		{"client no deadline", redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -2}), 0, false},
		{"cluster default", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}}), 5 * time.Second, true},
		{"cluster set", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ReadTimeout: 2 * time.Second}), 2 * time.Second, true},
		{"cluster none", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ReadTimeout: -1}), 0, false},
		{"cluster no deadline", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ReadTimeout: -2}), 0, false},
		{"ring default", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}}), 5 * time.Second, true},
		{"ring set", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ReadTimeout: time.Second}), time.Second, true},
		{"ring none", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ReadTimeout: -1}), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.rdb.Close()
			got, bounded := readTimeout(tc.rdb)
			require.Equal(t, tc.bounded, bounded)
			if bounded {
				require.Equal(t, tc.want, got)
			}
			o := Options{Replicas: 1, WaitTimeout: 5 * time.Second}
			require.Equal(t, tc.bounded && tc.want <= o.WaitTimeout, o.checkReadTimeout(tc.rdb) != nil)
		})
	}
}
