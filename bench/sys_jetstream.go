package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	jsStream   = "BENCH"
	jsSubject  = "bench.q"
	jsConsumer = "workers"
	// jsAckWait is the consumer's AckWait, the counterpart of walq's
	// AckTimeout in the walq adapter.
	jsAckWait = 30 * time.Second
)

// jsVariant is one configuration of the JetStream queue.
type jsVariant struct {
	mode       string
	syncAlways bool // server option SyncAlways: every write fsynced before PubAck
	// doubleAck acks with msg.DoubleAck, which waits for the server's
	// confirmation, instead of msg.Ack, which does not.
	doubleAck bool
}

func jetstreamSystems() []System {
	mk := func(v jsVariant, only []string) System {
		return System{
			Name: "jetstream/" + v.mode, Family: "jetstream", Mode: v.mode, Kind: KindQueue,
			Durable: v.syncAlways, Bulk: !v.syncAlways, FIFO: true, Reader: "jetstream/default", Workloads: only,
			Config: func(Hint) string { return jsConfig(v) },
			Open:   func(dir string, _ Hint) (Queue, error) { return openJetStream(dir, v) },
		}
	}
	return []System{
		mk(jsVariant{mode: "default"}, nil),
		mk(jsVariant{mode: "sync", syncAlways: true}, nil),
		// Its enqueues are jetstream/sync's: it runs where messages are acked.
		mk(jsVariant{mode: "doubleack", syncAlways: true, doubleAck: true}, []string{wDrain, wCycle}),
	}
}

func jsConfig(v jsVariant) string {
	sync := "file store fsynced every 2m (server default sync_interval)"
	if v.syncAlways {
		sync = "file store with SyncAlways (every write fsynced)"
	}
	ack := "msg.Ack() (does not wait for the server)"
	if v.doubleAck {
		ack = "msg.DoubleAck(ctx) (waits for the server's confirmation of each ack)"
	}
	return sync + "; embedded server, in-process connection; stream WorkQueuePolicy " +
		"(acked messages deleted); js.Publish waits for PubAck; one durable pull consumer, " +
		"AckExplicit, AckWait 30s, Messages() iterator per consuming goroutine " +
		"(default prefetch 500), " + ack
}

// jsQueue is an embedded nats-server with JetStream and one client
// connection shared by all goroutines, as the client's docs advise.
type jsQueue struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
	// doubleAck makes deliveries ack with DoubleAck.
	doubleAck bool
}

func openJetStream(dir string, v jsVariant) (q *jsQueue, err error) {
	srv, err := server.NewServer(&server.Options{
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: v.syncAlways,
		DontListen: true,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: new server: %w", err)
	}
	q = &jsQueue{srv: srv, doubleAck: v.doubleAck}
	defer func() {
		if err != nil {
			err = errors.Join(err, q.Close())
		}
	}()
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		return q, errors.New("jetstream: server not ready after 30s")
	}
	if q.nc, err = nats.Connect("", nats.InProcessServer(srv)); err != nil {
		return q, fmt.Errorf("jetstream: connect: %w", err)
	}
	if q.js, err = jetstream.New(q.nc); err != nil {
		return q, fmt.Errorf("jetstream: client: %w", err)
	}
	return q, q.setup()
}

// setup creates (or, on reopen, finds) the stream and its durable consumer.
func (q *jsQueue) setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      jsStream,
		Subjects:  []string{jsSubject},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy,
		Replicas:  1,
	})
	if err != nil {
		return fmt.Errorf("jetstream: stream: %w", err)
	}
	q.cons, err = stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   jsConsumer,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   jsAckWait,
	})
	if err != nil {
		return fmt.Errorf("jetstream: consumer: %w", err)
	}
	return nil
}

func (q *jsQueue) Enqueue(ctx context.Context, payload []byte) error {
	_, err := q.js.Publish(ctx, jsSubject, payload)
	return err
}

func (q *jsQueue) NewConsumer() (Consumer, error) {
	it, err := q.cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("jetstream: messages: %w", err)
	}
	return jsConsumerHandle{it: it, doubleAck: q.doubleAck}, nil
}

// DequeueOne pulls exactly one message; the Messages iterator would prefetch
// hundreds, left pending until AckWait when the caller stops.
func (q *jsQueue) DequeueOne(ctx context.Context) (Delivery, error) {
	m, err := q.cons.Next(jetstream.FetchContext(ctx))
	if err != nil {
		return nil, err
	}
	return jsDelivery{m: m, doubleAck: q.doubleAck}, nil
}

// Settle waits until the server has applied every ack: acks are sent without
// waiting for a reply.
func (q *jsQueue) Settle(ctx context.Context) error {
	for {
		info, err := q.cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending == 0 {
			return nil
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (q *jsQueue) Close() error {
	if q.nc != nil {
		q.nc.Close()
	}
	q.srv.Shutdown()
	q.srv.WaitForShutdown()
	return nil
}

// jsConsumerHandle is one goroutine's pull iterator.
type jsConsumerHandle struct {
	it        jetstream.MessagesContext
	doubleAck bool
}

func (c jsConsumerHandle) Dequeue(ctx context.Context) (Delivery, error) {
	m, err := c.it.Next(jetstream.NextContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return jsDelivery{m: m, doubleAck: c.doubleAck}, nil
}

func (c jsConsumerHandle) Close() error {
	c.it.Stop()
	return nil
}

type jsDelivery struct {
	m         jetstream.Msg
	doubleAck bool
}

func (d jsDelivery) Payload() []byte { return d.m.Data() }

// jsDoubleAckWait bounds the wait for the server's confirmation of an ack.
const jsDoubleAckWait = 30 * time.Second

func (d jsDelivery) Ack() error {
	if !d.doubleAck {
		return d.m.Ack()
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsDoubleAckWait)
	defer cancel()
	return d.m.DoubleAck(ctx)
}
