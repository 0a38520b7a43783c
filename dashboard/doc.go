// Package dashboard is an http.Handler that a service mounts to show its
// queue: a JSON API (figures, ready, in-flight, delayed and dead messages
// paged, a message's headers and payload, a sorted queue's keys) and one
// small page built on it, embedded in the binary, that loads nothing from
// the internet.
//
// # Mounting
//
// The handler serves paths relative to where it is mounted; strip the
// prefix:
//
//	h := dashboard.New(dashboard.ForQueue(q), nil)
//	mux.Handle("/queue/", http.StripPrefix("/queue", requireAdmin(h)))
//
// The dashboard has no authentication of its own: wrap it in the
// service's middleware, as requireAdmin does above (see Example).
//
// # Actions
//
// It is read-only unless Options.Actions is set. Actions (requeue and
// purge of dead letters) are accepted only as POST requests with a JSON
// body, from the same origin: a browser request from another site is
// refused by its Sec-Fetch-Site header (or, from an older browser, its
// Origin), and a JSON content type cannot be sent cross-site without a
// CORS preflight, which the handler never grants. GET requests never change anything.
//
// An action names its dead letter by the Ref the message list gave. The
// Ref of an ack queue's dead letter is "SEQ@ID" ("SEQ~HEX", the id in
// hex, for an id that is not UTF-8, which JSON cannot carry): a power
// loss under SyncNever or SyncInterval can take a dead letter while a
// page lists it, and the next run gives its sequence number to another
// message, so the view, requeue and purge act only while the sequence
// number holds that id (ErrNotFound, 404, otherwise), and the actions
// refuse a bare sequence number (ErrInvalid, 400). A sorted queue's dead
// value is
// "SEQ@PUBLISHED_UNIX_NS", checked the same way (see ForSorted); one
// whose publish time cannot be read (a damaged record of the Redis
// engine) is named by its SEQ alone, which the actions take for such a
// value only. The
// requeue of an embedded queue's dead letter or value whose payload
// cannot be read for damage (the list shows its reason ending in
// "corrupt record: …") is refused with 409 (ErrRefused) and the read
// error: requeued, it would only fail again. Purge it, or repair the
// directory first. ForAckQueue and ForSortedQueue over the Redis engine
// (redisq) do not refuse it: that engine's requeue does not read the
// body, and the letter or value fails again at its next delivery or pull;
// ForSortedQueue refuses (409) to requeue a dead value whose key an
// earlier release of redisq did not record. Only a requeue answers 409;
// another action that fails with damage answers 500.
//
// # Bytes that are not UTF-8
//
// A JSON string carries UTF-8 only. A message's id, reason or header
// that is not valid UTF-8 is sent in base64 (standard, padded) in
// id_base64, reason_base64 or headers_base64 (name and value both), with
// id and reason then empty and that header left out of headers, the
// names and rules of walq's --json output; Message.Exact gives a Message
// decoded from the API its exact bytes back. A sorted queue's key that
// is not UTF-8 is sent by api/keys the same way, in key_base64 with key
// empty (Key.Exact gives it back; a page's Next carries it in hex).
//
// # Sources
//
// The handler reads a Source, a small interface that every walq queue kind
// satisfies through ForQueue and ForSorted, and that another backend can
// implement. DeadActions and KeySource are optional. Any engine's queues,
// the Redis backend's (redisq) included, are shown through the method
// sets every engine offers: ForAckQueue (queue.AckQueue) and
// ForSortedQueue (queue.SortedQueue, a windowed queue's Sorted too), with
// their figures and dead sets but no ready, in-flight or delayed list and
// no key list, which those method sets cannot read.
//
// # History
//
// Depth and rates over the last minutes come from samples of the figures
// the handler takes when the API is read (at most one per second), or
// every interval while Run runs. Without Run, the history starts when the
// page is first opened. Figures that cannot be read (a closed queue, an
// engine whose StatsContext fails) are answered as an error, never as
// zeros, take no sample, and are logged by Run. The counts of a queue
// whose log a failed write poisoned and that could not be read back
// (queue.Stats.CountsErr) are the calls', failed ones included: api/stats
// answers them with counts_error (Stats.CountsError) saying why, and
// counts_corrupt true when that is damage rather than another read error,
// and the page says so above them. When the record of the oldest never-delivered
// message cannot be read (queue.Stats.OldestErr: damage, or a read error),
// the age of the oldest message leaves it out: api/stats answers
// oldest_error (Stats.OldestError) saying why, and oldest_corrupt true
// when the record is damaged rather than unread for another reason (so a
// client such as walq stats --url tells the two apart), and the page says
// so above the figures.
//
// A Handler is safe for concurrent use.
package dashboard
