package dashboard_test

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/walq/walq/dashboard"
	"github.com/walq/walq/queue"
)

// requireAdmin is the service's own authentication; the dashboard has
// none. Basic auth here; a session cookie or an SSO proxy works the same.
func requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user+":"+pass), []byte("admin:secret")) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="queue"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// A service mounts the dashboard of its queue under /queue/, behind its
// own authentication, with requeue and purge of dead letters enabled.
func Example() {
	dir, _ := os.MkdirTemp("", "walq-dashboard")
	defer os.RemoveAll(dir)
	q, err := queue.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer q.Close()

	mux := http.NewServeMux()
	dash := dashboard.New(dashboard.ForQueue(q), &dashboard.Options{Title: "orders", Actions: true})
	mux.Handle("/queue/", http.StripPrefix("/queue", requireAdmin(dash)))
	srv := httptest.NewServer(mux) // a real service: http.ListenAndServe(addr, mux)
	defer srv.Close()

	res, _ := http.Get(srv.URL + "/queue/api/stats")
	fmt.Println("without credentials:", res.StatusCode)
	res.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/queue/api/stats", nil)
	req.SetBasicAuth("admin", "secret")
	res, _ = http.DefaultClient.Do(req)
	fmt.Println("as admin:", res.StatusCode)
	res.Body.Close()
	// Output:
	// without credentials: 401
	// as admin: 200
}
