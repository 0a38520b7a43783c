// Package cli is the walq command: every command, its flags, help and
// exit statuses. cmd/walq runs it on queue directories; a binary that
// links a queue engine on a server (redisq/cmd/walq-redis) passes an
// Engine, and the commands that work on any ack queue (stats, dlq, enqueue,
// dequeue, ack, nack, extend, requeue-expired, demo) then also take a URL
// where they take DIR. Main is not safe to call concurrently: it reads os.Args and
// writes os.Stdout.
package cli
