//go:build !linux

package dirty

import (
	"context"
	"log/slog"
)

// Config configures a Watcher.
type Config struct {
	Root     string
	Logger   *slog.Logger
	MaxPaths int
	MaxDirs  int
}

// Watcher keeps a cache's dirty set; only Linux (inotify) has one. Elsewhere
// every commit scans the cache.
type Watcher struct{}

// New returns ErrUnsupported.
func New(Config) (*Watcher, error) { return nil, ErrUnsupported }

// Run returns ErrUnsupported.
func (w *Watcher) Run(context.Context) error { return ErrUnsupported }

// Watch returns ErrUnsupported.
func (w *Watcher) Watch(context.Context) error { return ErrUnsupported }

// Snapshot returns ErrUnsupported.
func (w *Watcher) Snapshot(context.Context) (*Snapshot, error) { return nil, ErrUnsupported }

// Ack does nothing.
func (w *Watcher) Ack(string, uint64, bool, []string) {}

// Close does nothing.
func (w *Watcher) Close() error { return nil }
