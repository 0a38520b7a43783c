package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/internal/twin"
	"github.com/walq/walq/queue"
)

// remoteFlags are the flags of a command that can read a running service's
// dashboard instead of a directory.
type remoteFlags struct {
	url      *string
	watch    *bool
	interval *time.Duration
	times    *int
	headers  headerList
}

// headerList is a repeatable -H "Name: value" flag.
type headerList []string

func (h *headerList) String() string { return strings.Join(*h, ", ") }

// Set adds v. newClient checks its form: the flag package quotes the
// value of a flag whose Set fails, and a header given for authentication
// holds a secret (a token given without its name, say).
func (h *headerList) Set(v string) error {
	*h = append(*h, v)
	return nil
}

// addRemoteFlags declares --url, --watch, --interval, --times and -H on fs.
func addRemoteFlags(fs *flag.FlagSet, watchable bool) *remoteFlags {
	r := &remoteFlags{
		url: fs.String("url", "", "read a running service's dashboard at `URL` instead of DIR"),
	}
	fs.Var(&r.headers, "H", "with --url: send the `header` \"Name: value\" (repeatable), e.g. for authentication")
	if watchable {
		r.watch = fs.Bool("watch", false, "with --url: refresh every --interval, in place on a terminal")
		r.interval = fs.Duration("interval", 2*time.Second, "with --watch: time between refreshes")
		r.times = fs.Int("times", 0, "with --watch: stop after `N` refreshes (0: until interrupted)")
	}
	return r
}

// withRemote returns a command's runner: the remote form when --url is set,
// else local, which takes DIR and then after more arguments; the remote
// form takes those after arguments alone.
func withRemote(r *remoteFlags, after int, remote func(e *env, c *client, args []string) error,
	local func(e *env, args []string) error) func(*env, []string) error {
	return func(e *env, args []string) error {
		if *r.url == "" {
			switch {
			case len(args) == 0:
				return usagef("missing DIR (or --url URL)")
			case len(args) != after+1:
				return usagef("want %d arguments, got %d", after+1, len(args))
			}
			return local(e, args)
		}
		switch {
		case len(args) > after:
			return usagef("--url takes no DIR")
		case len(args) < after:
			return usagef("want %d arguments after --url URL, got %d", after, len(args))
		}
		c, err := newClient(*r.url, r.headers)
		if err != nil {
			return err
		}
		if r.watch == nil || !*r.watch {
			return remote(e, c, args)
		}
		return watch(e, *r.interval, *r.times, func() error { return remote(e, c, args) })
	}
}

// watch runs show every interval, clearing a terminal before each run, until
// times runs (forever when 0) or an error. An error the figures show
// (shownError) does not end it: it returns that of the last run.
func watch(e *env, interval time.Duration, times int, show func() error) error {
	if interval <= 0 {
		return usagef("--interval must be positive")
	}
	var last error
	for i := 0; times == 0 || i < times; i++ {
		if i > 0 {
			time.Sleep(interval)
		}
		if e.outTTY {
			fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, clear screen
		} else if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		err := show()
		var shown *shownError
		if err != nil && !errors.As(err, &shown) {
			return err
		}
		last = err
	}
	return last
}

// client reads a dashboard's JSON API.
type client struct {
	base    *url.URL
	headers http.Header
	http    *http.Client
}

func newClient(raw string, headers []string) (*client, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--url %q is not an http(s) URL", Redacted(raw))
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/" // the dashboard's mount point
	}
	c := &client{base: u, headers: http.Header{}, http: &http.Client{Timeout: 10 * time.Second}}
	for i, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, usagef("-H number %d is not \"Name: value\" (not shown: it may hold a secret)", i+1)
		}
		c.headers.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	return c, nil
}

// get reads the API path with query q into v.
func (c *client) get(path string, q url.Values, v any) error {
	u := c.base.JoinPath(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header = c.headers.Clone()
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("read %s: %w", u.Redacted(), err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", u.Redacted(), err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		err := fmt.Errorf("%s: %s: %s", u.Redacted(), res.Status, e.Error)
		if res.StatusCode == http.StatusNotFound {
			return withExit(exitNotFound, err)
		}
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s is not a walq dashboard: %w", u.Redacted(), err)
	}
	return nil
}

// remoteStats is the dashboard's api/stats reply.
type remoteStats struct {
	Title   string             `json:"title"`
	Stats   dashboard.Stats    `json:"stats"`
	History []dashboard.Sample `json:"history"`
}

// remoteStatsCmd prints a running service's figures.
func remoteStatsCmd(asJSON *bool) func(e *env, c *client, args []string) error {
	return func(e *env, c *client, _ []string) error {
		var r remoteStats
		if err := c.get("api/stats", nil, &r); err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r.Stats); err != nil {
				return err
			}
		} else {
			printRemoteStats(e.stdout, c.base.Redacted(), &r)
		}
		return remoteUnread(r.Stats)
	}
}

// shownError is an error that the figures a command printed already
// show: a --watch goes on refreshing through it, and ends with the one
// of its last refresh.
type shownError struct{ err error }

func (e *shownError) Error() string { return e.err.Error() }
func (e *shownError) Unwrap() error { return e.err }

// remoteUnread returns what stats --url ends with, its figures printed,
// when the service could not read its counts from the log (counts_error)
// or the record of the oldest never-delivered message (oldest_error):
// exit status 2 when either is damage (counts_corrupt, oldest_corrupt), 1
// otherwise, a dashboard too old to say included; nil when neither.
func remoteUnread(s dashboard.Stats) error {
	var errs []error
	code := exitFailure
	if s.CountsError != "" {
		errs = append(errs, fmt.Errorf("the counts could not be checked against the log: %s", s.CountsError))
		if s.CountsCorrupt {
			code = exitCorrupt
		}
	}
	if s.OldestError != "" {
		errs = append(errs, fmt.Errorf("the record of the oldest never-delivered message could not be read: %s", s.OldestError))
		if s.OldestCorrupt {
			code = exitCorrupt
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &shownError{withExit(code, errors.Join(errs...))}
}

func printRemoteStats(w io.Writer, where string, r *remoteStats) {
	s := r.Stats
	fmt.Fprintf(w, "%s %s (%s) at %s\n", s.Kind, r.Title, where, time.Now().Format(time.TimeOnly))
	fmt.Fprintf(w, "  ready       %d\n  in flight   %d\n  delayed     %d\n  dead        %d\n", s.Ready, s.InFlight, s.Delayed, s.Dead)
	if s.Kind == "sorted" {
		fmt.Fprintf(w, "  keys        %d\n", s.Keys)
	}
	oldest := "none"
	if s.OldestAgeSeconds > 0 {
		oldest = time.Duration(s.OldestAgeSeconds*float64(time.Second)).Round(time.Millisecond).String() + " ago"
	}
	fmt.Fprintf(w, "  oldest      %s%s\n", oldest, unreadOldest(s.OldestError, s.Kind == "sorted"))
	fmt.Fprintf(w, "  log         %s, of which live %s\n", sizeText(s.LogBytes), sizeText(s.LiveBytes))
	if enq, ack, ok := lastRates(r.History); ok {
		fmt.Fprintf(w, "rates\n  enqueued %.1f/s, acked %.1f/s\n", enq, ack)
	}
	fmt.Fprintf(w, "lifetime\n  enqueued %d, delivered %d, acked %d, nacked %d, expired %d, dead-lettered %d\n",
		s.Enqueued, s.Delivered, s.Acked, s.Nacked, s.Expired, s.DeadLettered)
	if s.BackgroundError != "" {
		fmt.Fprintf(w, "background work failing since %s (%d failures): %s\n",
			s.BackgroundErrorAt.Format(time.RFC3339), s.BackgroundErrors, s.BackgroundError)
	}
	printUnchecked(w, s.CountsError) // stats.go
}

// lastRates returns the enqueue and ack rates between the last two
// samples.
func lastRates(h []dashboard.Sample) (enq, ack float64, ok bool) {
	if len(h) < 2 {
		return 0, 0, false
	}
	a, b := h[len(h)-2], h[len(h)-1]
	dt := b.At.Sub(a.At).Seconds()
	if dt <= 0 {
		return 0, 0, false
	}
	return float64(b.Enqueued-a.Enqueued) / dt, float64(b.Acked-a.Acked) / dt, true
}

// remoteDLQList prints a running service's dead letters, oldest first.
func remoteDLQList(asJSON *bool, limit *int) func(e *env, c *client, args []string) error {
	return func(e *env, c *client, _ []string) error {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		if !*asJSON {
			fmt.Fprintln(tw, "ID\tSEQ\tDELIVERIES\tENQUEUED\tBYTES\tREASON")
		}
		n := 0
		err := eachRemoteDead(c, func(m dashboard.Message) error {
			n++
			if *asJSON {
				return enc.Encode(toRemoteDeadJSON(m))
			}
			_, err := fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", m.ID, refSeq(m.Ref), m.Deliveries, jsonTime(m.EnqueuedAt), m.Size, m.Reason)
			return err
		}, *limit)
		if err == nil && !*asJSON {
			err = tw.Flush()
		}
		return err
	}
}

// toRemoteDeadJSON returns a dead letter as dlq list --url prints it with
// --json: as the service sends it, with its id, reason and headers (as
// exact as exactMessage made them) in base64 twins where they are not
// valid UTF-8, as the local form prints them.
func toRemoteDeadJSON(m dashboard.Message) dashboard.Message {
	m.ID, m.IDBase64 = twin.Split(m.ID)
	m.Reason, m.ReasonBase64 = twin.Split(m.Reason)
	m.Headers, m.HeadersBase64 = twin.SplitHeaders(m.Headers)
	return m
}

// exactMessage returns m as the service sent it with the exact bytes of
// its id, reason and headers: from their base64 twins, or, from a service
// that sends no twins, an id that is not valid UTF-8 from its ref, which
// carries it in hex (SEQ~HEX).
func exactMessage(m dashboard.Message) (dashboard.Message, error) {
	m, err := m.Exact()
	if err != nil {
		return m, err
	}
	if h, ok := refHex(m.Ref); ok {
		if id, err := hex.DecodeString(h); err == nil {
			m.ID = string(id)
		}
	}
	return m, nil
}

// refHex returns the HEX of a SEQ~HEX reference and true; a SEQ@ID
// reference, whose id may itself hold "~", returns false.
func refHex(ref string) (string, bool) {
	i := strings.IndexAny(ref, "@~")
	if i <= 0 || ref[i] != '~' {
		return "", false
	}
	for _, c := range ref[:i] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return ref[i+1:], true
}

// refSeq returns the seq of a dead letter's reference, SEQ@ID or SEQ~HEX
// (the id in hex): the part before the first "@" or "~", as a seq is
// digits only. The ID column already shows the id.
func refSeq(ref string) string {
	if i := strings.IndexAny(ref, "@~"); i >= 0 {
		return ref[:i]
	}
	return ref
}

// eachRemoteDead calls fn for up to limit (0: every) dead letter.
func eachRemoteDead(c *client, fn func(dashboard.Message) error, limit int) error {
	after, n := "", 0
	for {
		var p dashboard.Page
		q := url.Values{"state": {"dead"}, "limit": {"500"}, "after": {after}}
		if err := c.get("api/messages", q, &p); err != nil {
			return err
		}
		for _, m := range p.Messages {
			if limit > 0 && n == limit {
				return nil
			}
			m, err := exactMessage(m)
			if err != nil {
				return fmt.Errorf("%s: %w", c.base.Redacted(), err)
			}
			if err := fn(m); err != nil {
				return err
			}
			n++
		}
		if p.Next == "" {
			return nil
		}
		after = p.Next
	}
}

// remoteMessage is the dashboard's api/message reply: a message with a
// preview of its payload, as text when it is UTF-8, else in base64, and
// the whole payload's encoding as dlq show prints it (empty from a
// service whose dashboard does not report it).
type remoteMessage struct {
	dashboard.Message
	PayloadBytes    int    `json:"payload_bytes"`
	PayloadText     string `json:"payload_text"`
	PayloadBinary   []byte `json:"payload_base64"`
	PayloadEncoding string `json:"payload_encoding"`
	Truncated       bool   `json:"truncated"`
}

// errFound stops eachRemoteDead at the dead letter looked for.
var errFound = errors.New("found")

// remoteDLQShow prints one dead letter of a running service as dlq show
// prints it from a directory: found in the list (remoteDeadRef), then
// read with its payload's preview by its ref.
func remoteDLQShow(asJSON *bool) func(e *env, c *client, args []string) error {
	return func(e *env, c *client, args []string) error {
		ref, err := remoteDeadRef(c, args[0])
		if err != nil {
			return err
		}
		var r remoteMessage
		if err := c.get("api/message", url.Values{"ref": {ref}}, &r); err != nil {
			return err
		}
		d, err := remoteDead(r)
		if err != nil {
			return fmt.Errorf("%s: %w", c.base.Redacted(), err)
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(toDeadPreviewJSON(d, r.PayloadBytes, r.PayloadEncoding))
		}
		printDeadPreview(e.stdout, d, r.PayloadBytes, r.PayloadEncoding)
		return nil
	}
}

// remoteDeadRef returns the ref of the dead letter that id names: the
// first (oldest) whose id it is, as the local dlq show takes; only when
// no id is id, the one whose ref it is.
func remoteDeadRef(c *client, id string) (string, error) {
	byID, byRef := "", ""
	err := eachRemoteDead(c, func(m dashboard.Message) error {
		switch {
		case m.ID == id:
			byID = m.Ref
			return errFound
		case m.Ref == id && byRef == "":
			byRef = m.Ref
		}
		return nil
	}, 0)
	switch {
	case err != nil && !errors.Is(err, errFound):
		return "", err
	case byID != "":
		return byID, nil
	case byRef != "":
		return byRef, nil
	}
	return "", fmt.Errorf("%w: no dead letter %q", queue.ErrNotFound, id)
}

// remoteDead returns the dead letter of the service's reply r, with the
// exact bytes of its id, reason and headers and its payload's preview.
func remoteDead(r remoteMessage) (queue.DeadLetter, error) {
	m, err := exactMessage(r.Message)
	if err != nil {
		return queue.DeadLetter{}, err
	}
	seq, _ := strconv.ParseUint(refSeq(m.Ref), 10, 64)
	p := r.PayloadBinary
	if p == nil {
		p = []byte(r.PayloadText)
	}
	return queue.DeadLetter{ID: m.ID, Seq: seq, Deliveries: m.Deliveries, EnqueuedAt: m.EnqueuedAt,
		Reason: m.Reason, Headers: m.Headers, Payload: p}, nil
}
