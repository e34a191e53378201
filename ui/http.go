package ui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"time"

	"github.com/syncledger/syncledger/internal/loopback"
)

//go:embed assets
var assets embed.FS

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// Public accepts any Host header. By default only requests addressed to a
	// loopback address or "localhost" are served, so that a web page elsewhere
	// cannot read the dashboard through DNS rebinding.
	Public bool
}

// Handler serves the page and its API:
//
//	GET /             the page (index.html, app.js, app.css: embedded, no CDN)
//	GET /api/state    the State as JSON
//	GET /api/events   server-sent events, one "state" event per change
func (d *Dashboard) Handler(o HandlerOptions) http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(d.State())
	})
	mux.HandleFunc("GET /api/events", d.events)
	return secure(o, mux)
}

// secure adds the security headers and refuses foreign Host headers.
func secure(o HandlerOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.Public && !loopback.Host(r.Host) {
			http.Error(w, "this dashboard answers only on a loopback address (serve it with --ui-public to change that)", http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// events streams the state as server-sent events: at once, then after every
// change, at most every Config.MinInterval, with a comment every 15 s to keep
// proxies from closing an idle stream.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		changed := d.Changed()
		b, err := json.Marshal(d.State())
		if err != nil {
			return
		}
		if _, err := w.Write(append(append([]byte("event: state\ndata: "), b...), '\n', '\n')); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		for waiting := true; waiting; {
			select {
			case <-r.Context().Done():
				return
			case <-keepAlive.C:
				if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
					return
				}
				_ = rc.Flush()
			case <-changed:
				waiting = false
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(d.cfg.MinInterval):
		}
	}
}
