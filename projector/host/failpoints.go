//go:build failpoints

package host

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

// SetFailpoint makes h call fn at each of Failpoints (nil: none). Only in a
// build with -tags failpoints.
func (h *Host) SetFailpoint(fn func(name string)) { h.fp.fn = fn }
