package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"maragu.dev/goqite"
	_ "modernc.org/sqlite" // the "sqlite" driver: SQLite in pure Go, no cgo
)

// goqite is the closest peer in semantics: an SQS-like queue on one SQLite
// table, where a received message stays invisible for a timeout and is
// deleted once handled.
const (
	goqiteQueue = "bench"
	// goqiteTimeout is a received message's visibility timeout, the
	// counterpart of walq's AckTimeout.
	goqiteTimeout = walqAckTimeout
)

// goqiteSchema creates the table goqite reads and writes; goqite ships it
// as schema_sqlite.sql and its README has users run it before New.
const goqiteSchema = `
create table if not exists goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict;
create trigger if not exists goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end;
create index if not exists goqite_queue_priority_created_idx on goqite (queue, priority desc, created);
`

func goqiteSystems() []System {
	mk := func(mode, synchronous string, durable bool, what string) System {
		return System{
			Name: "goqite/" + mode, Family: "goqite", Mode: mode, Kind: KindQueue,
			Durable: durable, Bulk: !durable, Reader: "goqite/normal",
			// Receive takes the oldest by a millisecond timestamp; the order
			// within a millisecond is not promised.
			FIFO: false,
			Config: func(Hint) string {
				return fmt.Sprintf("%s; modernc.org/sqlite (pure Go), journal_mode=WAL, busy_timeout=5000, "+
					"foreign_keys=on, one connection (goqite's README); Timeout=%v, MaxReceive default (3); "+
					"Send; Receive (polled: the adapter wakes consumers after each Send), Delete as the ack",
					what, goqiteTimeout)
			},
			Open: func(dir string, _ Hint) (Queue, error) { return openGoqite(dir, synchronous) },
		}
	}
	return []System{
		mk("full", "FULL", true, "synchronous=FULL (SQLite's default): each commit fsyncs the WAL"),
		mk("normal", "NORMAL", false,
			"synchronous=NORMAL: commits are not fsynced, checkpoints are (survives a process crash, not a power loss)"),
	}
}

// goqiteDSN is the modernc.org/sqlite data source for the database file.
func goqiteDSN(path, synchronous string) string {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(5000)", "foreign_keys(1)", "synchronous(" + synchronous + ")"} {
		q.Add("_pragma", p)
	}
	return "file:" + path + "?" + q.Encode()
}

// goqiteStore adapts a goqite queue on its own database file.
type goqiteStore struct {
	db    *sql.DB
	q     *goqite.Queue
	ready *wakeup // broadcast after every Send
}

func openGoqite(dir, synchronous string) (*goqiteStore, error) {
	db, err := sql.Open("sqlite", goqiteDSN(filepath.Join(dir, "queue.db"), synchronous))
	if err != nil {
		return nil, fmt.Errorf("goqite: open %s: %w", dir, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if _, err := db.Exec(goqiteSchema); err != nil {
		return nil, errors.Join(fmt.Errorf("goqite: schema: %w", err), db.Close())
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: goqiteQueue, Timeout: goqiteTimeout})
	return &goqiteStore{db: db, q: q, ready: newWakeup()}, nil
}

func (g *goqiteStore) Enqueue(ctx context.Context, payload []byte) error {
	if err := g.q.Send(ctx, goqite.Message{Body: payload}); err != nil {
		return err
	}
	g.ready.broadcast()
	return nil
}

func (g *goqiteStore) NewConsumer() (Consumer, error) { return goqiteConsumer{g}, nil }

func (g *goqiteStore) Close() error { return g.db.Close() }

// goqiteConsumer is a consuming goroutine's handle.
type goqiteConsumer struct{ g *goqiteStore }

func (c goqiteConsumer) Dequeue(ctx context.Context) (Delivery, error) {
	for {
		woken := c.g.ready.wait()
		m, err := c.g.q.Receive(ctx)
		if err != nil {
			return nil, err
		}
		if m != nil {
			return goqiteDelivery{g: c.g, m: m}, nil
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c goqiteConsumer) Close() error { return nil }

type goqiteDelivery struct {
	g *goqiteStore
	m *goqite.Message
}

func (d goqiteDelivery) Payload() []byte { return d.m.Body }

// Ack deletes the message, as goqite's README says to once it is handled.
func (d goqiteDelivery) Ack() error { return d.g.q.Delete(context.Background(), d.m.ID) }
