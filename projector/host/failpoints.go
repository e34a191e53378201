//go:build failpoints

package host

import (
	"context"

	"github.com/syncledger/syncledger/ledger"
)

// Failpoints lists the named points at which a Host built with -tags
// failpoints calls the function SetFailpoint gave it, so crash tests can stop
// the process there (as etcd's gofail does). A normal build has none of this.
var Failpoints = []string{
	"sync-before-write",    // a Ready is staged, nothing written
	"sync-after-write",     // a Ready's files are written, not persisted
	"sync-after-persist",   // a Ready is persisted
	"commit-after-scan",    // changes found, nothing uploaded
	"commit-after-upload",  // blobs stored, nothing published
	"commit-after-append",  // events in the log, not recorded locally
	"commit-after-persist", // a commit (of a split commit) recorded locally
}

type failpoints struct{ fn func(name string) }

func (f *failpoints) at(name string) {
	if f.fn != nil {
		f.fn(name)
	}
}

// log returns l with "commit-after-upload" at the start of each Append: after
// ledger.Publish stored the manifests, before it appends.
func (f *failpoints) log(l ledger.CommitLog) ledger.CommitLog {
	return failpointLog{CommitLog: l, f: f}
}

type failpointLog struct {
	ledger.CommitLog
	f *failpoints
}

func (l failpointLog) Append(ctx context.Context, events []ledger.Event, fences ...ledger.Fence) ([]ledger.Seq, error) {
	l.f.at("commit-after-upload")
	return l.CommitLog.Append(ctx, events, fences...)
}

// SetFailpoint makes h call fn at each of Failpoints (nil: none). Only in a
// build with -tags failpoints.
func (h *Host) SetFailpoint(fn func(name string)) { h.fp.fn = fn }
