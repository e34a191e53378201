package faulty

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Hang is an http.Handler in front of another (an S3 server, gofakes3) that,
// while on (Set), accepts every request and never answers it: the client's
// connection stays open, its request unread, until the client gives up —
// an S3 endpoint or a proxy that hangs. Close ends the requests it holds.
type Hang struct {
	next  http.Handler
	on    atomic.Bool
	held  atomic.Int64
	once  sync.Once
	close chan struct{}
}

// NewHang returns a Hang in front of next, off.
func NewHang(next http.Handler) *Hang {
	return &Hang{next: next, close: make(chan struct{})}
}

// Set turns the hang on or off; requests held stay held.
func (h *Hang) Set(on bool) { h.on.Store(on) }

// Held returns how many requests it has held.
func (h *Hang) Held() int64 { return h.held.Load() }

func (h *Hang) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.on.Load() {
		h.next.ServeHTTP(w, r)
		return
	}
	h.held.Add(1)
	select {
	case <-r.Context().Done():
	case <-h.close:
	}
}

// Close ends the requests it holds (unanswered) and every later one's hang.
func (h *Hang) Close() {
	h.once.Do(func() {
		h.on.Store(false)
		close(h.close)
	})
}
