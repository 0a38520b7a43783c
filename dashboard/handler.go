package dashboard

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/walq/walq/internal/twin"
)

//go:embed static
var static embed.FS

// Options configures a Handler. A nil *Options means the defaults.
type Options struct {
	// Actions enables requeue and purge of dead letters from the page and
	// the API. Default false: read-only.
	Actions bool
	// Title is the page's title. Default "walq".
	Title string
	// History is how far back the page's charts reach. Default 10 minutes.
	History time.Duration
	// PreviewBytes is how many payload bytes a message view shows.
	// Default 4096.
	PreviewBytes int
	// Logger receives one Info line per action taken, and Run's reports
	// of figures it cannot read. Default nil: actions are not logged, and
	// Run reports to slog.Default().
	Logger *slog.Logger
}

// Handler serves the dashboard. Create it with New.
type Handler struct {
	src   Source
	opts  Options
	mux   *http.ServeMux
	hist  history
	now   func() time.Time
	files http.Handler
}

// New returns the dashboard of src.
func New(src Source, opts *Options) *Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Title == "" {
		o.Title = "walq"
	}
	if o.History <= 0 {
		o.History = 10 * time.Minute
	}
	if o.PreviewBytes <= 0 {
		o.PreviewBytes = 4096
	}
	sub, _ := fs.Sub(static, "static") // the embedded directory exists
	h := &Handler{src: src, opts: o, mux: http.NewServeMux(),
		hist: history{window: o.History}, now: time.Now, files: http.FileServerFS(sub)}
	h.routes()
	return h
}

func (h *Handler) routes() {
	h.mux.HandleFunc("GET /api/stats", h.getStats)
	h.mux.HandleFunc("GET /api/messages", h.getMessages)
	h.mux.HandleFunc("GET /api/message", h.getMessage)
	h.mux.HandleFunc("GET /api/keys", h.getKeys)
	h.mux.HandleFunc("POST /api/dead/requeue", h.postDead("requeue"))
	h.mux.HandleFunc("POST /api/dead/purge", h.postDead("purge"))
	h.mux.HandleFunc("GET /api/dead/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, errorReply{"actions take POST"})
	})
	h.mux.Handle("GET /", h.files)
}

// ServeHTTP serves the page and the API, relative to where the handler is
// mounted (strip the prefix with http.StripPrefix).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.mux.ServeHTTP(w, r)
}

// statsReply is GET api/stats.
type statsReply struct {
	Title   string   `json:"title"`
	Actions bool     `json:"actions"` // requeue and purge are enabled
	Keys    bool     `json:"keys"`    // api/keys lists a sorted queue's keys
	Stats   Stats    `json:"stats"`
	History []Sample `json:"history"` // oldest first
}

func (h *Handler) getStats(w http.ResponseWriter, r *http.Request) {
	s, err := h.sample(r.Context())
	if err != nil {
		h.fail(w, err)
		return
	}
	_, keys := h.src.(KeySource)
	_, acts := h.src.(DeadActions)
	writeJSON(w, http.StatusOK, statsReply{Title: h.opts.Title, Actions: h.opts.Actions && acts, Keys: keys,
		Stats: s, History: h.hist.list()})
}

func (h *Handler) getMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "ready"
	}
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		h.fail(w, err)
		return
	}
	p, err := h.src.Messages(r.Context(), state, q.Get("after"), limit)
	if err != nil {
		h.fail(w, err)
		return
	}
	sent := make([]Message, len(p.Messages))
	for i, m := range p.Messages {
		sent[i] = withTwins(m)
	}
	p.Messages = sent
	writeJSON(w, http.StatusOK, p)
}

// pageLimit reads a page size: default 50, at most 500.
func pageLimit(s string) (int, error) {
	if s == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: limit %q", ErrInvalid, s)
	}
	return min(n, 500), nil
}

// messageReply is GET api/message: the message, with base64 twins for
// the fields that are not UTF-8 (withTwins), and a preview of its
// payload, as text when it is UTF-8, else base64 (JSON's []byte).
// PayloadEncoding is how walq's --json output prints the whole payload
// ("text" or "base64", twin.Encoding), which its preview cannot tell: a
// payload may be text in its first PreviewBytes and binary past them.
type messageReply struct {
	Message
	PayloadBytes    int    `json:"payload_bytes"`
	PayloadText     string `json:"payload_text,omitempty"`
	PayloadBinary   []byte `json:"payload_base64,omitempty"`
	PayloadEncoding string `json:"payload_encoding"`
	Truncated       bool   `json:"truncated"`
}

func (h *Handler) getMessage(w http.ResponseWriter, r *http.Request) {
	m, err := h.src.Message(r.Context(), r.URL.Query().Get("ref"))
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, preview(m, h.opts.PreviewBytes))
}

func preview(m Message, limit int) messageReply {
	p := m.Payload
	rep := messageReply{Message: withTwins(m), PayloadBytes: len(p), PayloadEncoding: twin.Encoding(p),
		Truncated: len(p) > limit}
	p = p[:min(len(p), limit)]
	text := p
	if rep.Truncated {
		text = trimRune(p)
	}
	if utf8.Valid(text) && (len(text) > 0 || len(p) == 0) {
		rep.PayloadText = string(text)
	} else {
		rep.PayloadBinary = p
	}
	return rep
}

// trimRune drops a rune that a preview's cut split in two.
func trimRune(p []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(p) > 0 && !utf8.Valid(p); i++ {
		p = p[:len(p)-1]
	}
	return p
}

func (h *Handler) getKeys(w http.ResponseWriter, r *http.Request) {
	ks, ok := h.src.(KeySource)
	if !ok {
		h.fail(w, fmt.Errorf("%w: this queue has no keys", ErrNotFound))
		return
	}
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"))
	if err != nil {
		h.fail(w, err)
		return
	}
	p, err := ks.Keys(r.Context(), q.Get("after"), limit)
	if err != nil {
		h.fail(w, err)
		return
	}
	sent := make([]Key, len(p.Keys))
	for i, k := range p.Keys {
		sent[i] = keyWithTwin(k)
	}
	p.Keys = sent
	writeJSON(w, http.StatusOK, p)
}

// actionRequest is the body of POST api/dead/requeue and api/dead/purge.
type actionRequest struct {
	Ref string `json:"ref"`
}

func (h *Handler) postDead(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		acts, ok := h.src.(DeadActions)
		if err := h.allowAction(r, ok); err != nil {
			writeJSON(w, http.StatusForbidden, errorReply{err.Error()})
			return
		}
		var req actionRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			h.fail(w, fmt.Errorf("%w: %v", ErrInvalid, err))
			return
		}
		run := acts.RequeueDead
		if action == "purge" {
			run = acts.PurgeDead
		}
		if err := run(r.Context(), req.Ref); err != nil {
			h.fail(w, err)
			return
		}
		if h.opts.Logger != nil {
			h.opts.Logger.Info("dashboard: dead letter "+action+"d", "ref", req.Ref, "remote", r.RemoteAddr)
		}
		writeJSON(w, http.StatusOK, map[string]string{"ok": action})
	}
}

// allowAction checks that actions are on, that the request is same-origin
// and that its body is JSON.
func (h *Handler) allowAction(r *http.Request, supported bool) error {
	if !h.opts.Actions || !supported {
		return errors.New("actions are disabled")
	}
	if err := sameOrigin(r); err != nil {
		return err
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return errors.New("actions take a JSON body (Content-Type: application/json)")
	}
	return nil
}

// sameOrigin refuses a browser request sent by another site: one whose
// Sec-Fetch-Site (sent by every current browser) is neither same-origin
// nor none (typed by the user), or, from an older browser, whose Origin's
// host is not the request's. A request with neither header does not come
// from a browser page (curl, the walq command) and cannot be forged by one.
func sameOrigin(r *http.Request) error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return nil
	case "":
	default:
		return fmt.Errorf("cross-origin request refused (Sec-Fetch-Site: %s)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
		return fmt.Errorf("cross-origin request refused (Origin: %s, Host: %s)", origin, r.Host)
	}
	return nil
}

// errorReply is the body of every error response.
type errorReply struct {
	Error string `json:"error"`
}

// fail answers with err: 404 for ErrNotFound, 400 for a bad request, 409
// for ErrRefused, 500 otherwise.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, ErrRefused):
		code = http.StatusConflict
	}
	writeJSON(w, code, errorReply{err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}
