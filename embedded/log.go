package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
)

// levelTrace is the slog level of nats-server's trace output (below Debug).
const levelTrace = slog.LevelDebug - 4

// logAdapter routes nats-server's log to a *slog.Logger and remembers the first
// fatal message, which nats-server logs instead of returning an error (a listener
// that cannot bind, a store that cannot open).
type logAdapter struct {
	l *slog.Logger

	mu       sync.Mutex
	fatalMsg string

	// failed: a write failed for lack of space since JetStream (re)started
	// (nats-server logs it, and returns it to nobody); noSpace wakes the disk
	// watch when one does.
	failed  atomic.Bool
	noSpace chan struct{}
}

func newLogAdapter(l *slog.Logger) *logAdapter {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &logAdapter{l: l.With("component", "nats-server"), noSpace: make(chan struct{}, 1)}
}

// noSpaceErrors are how nats-server's log quotes a write that failed for lack
// of space (ENOSPC, EDQUOT).
var noSpaceErrors = []string{"no space left on device", "disk quota exceeded"}

// watch notes a write that failed for lack of space in a message nats-server
// logs as a warning or an error.
func (a *logAdapter) watch(format string, v []any) {
	msg := fmt.Sprintf(format, v...)
	for _, e := range noSpaceErrors {
		if strings.Contains(msg, e) {
			a.failed.Store(true)
			select {
			case a.noSpace <- struct{}{}:
			default:
			}
			return
		}
	}
}

// failedSinceStart reports whether a write failed for lack of space since
// JetStream (re)started.
func (a *logAdapter) failedSinceStart() bool { return a.failed.Load() }

// restarted forgets the failed writes: JetStream reopens its stores.
func (a *logAdapter) restarted() { a.failed.Store(false) }

func (a *logAdapter) enabled(level slog.Level) bool {
	return a.l.Enabled(context.Background(), level)
}

func (a *logAdapter) log(level slog.Level, format string, v []any) {
	if a.enabled(level) {
		a.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (a *logAdapter) fatal() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatalMsg
}

func (a *logAdapter) Noticef(format string, v ...any) { a.log(slog.LevelInfo, format, v) }
func (a *logAdapter) Warnf(format string, v ...any) {
	a.watch(format, v)
	a.log(slog.LevelWarn, format, v)
}

func (a *logAdapter) Errorf(format string, v ...any) {
	a.watch(format, v)
	a.log(slog.LevelError, format, v)
}
func (a *logAdapter) Debugf(format string, v ...any) { a.log(slog.LevelDebug, format, v) }
func (a *logAdapter) Tracef(format string, v ...any) { a.log(levelTrace, format, v) }

// Fatalf logs at error level and records the message; it does not exit.
func (a *logAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	a.mu.Lock()
	if a.fatalMsg == "" {
		a.fatalMsg = msg
	}
	a.mu.Unlock()
	a.l.Error(msg)
}
