package dirty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// MaxPaths bounds the set a watcher keeps: past it the set is dropped and
// untrusted until the next full scan, so memory stays bounded (about 15 MB)
// under any churn, the watch's own syncs included: a host that syncs much and
// commits rarely scans its cache on its next commit.
const MaxPaths = 1 << 17

// Files under the cache's state directory.
const (
	SocketName = "dirty.sock" // the watcher's socket
	BarrierDir = "barrier"    // where the watcher's marker files are made
)

// Snapshot is a watcher's answer: the paths that may have changed since its last
// full scan, as of a barrier after the request.
type Snapshot struct {
	Epoch   string   `json:"epoch"`   // the watcher run's id
	Seq     uint64   `json:"seq"`     // the sequence number of the barrier's event
	Trusted bool     `json:"trusted"` // Paths is every path that may have changed
	Reason  string   `json:"reason,omitempty"`
	Paths   []string `json:"paths,omitempty"` // slash-separated, relative to the cache; sorted
}

// request is one request on the socket.
type request struct {
	Op     string   `json:"op"` // "snapshot", "ack", "untrust" or "ping"
	Reason string   `json:"reason,omitempty"`
	Epoch  string   `json:"epoch,omitempty"`
	Seq    uint64   `json:"seq,omitempty"`
	Full   bool     `json:"full,omitempty"`
	Paths  []string `json:"paths,omitempty"`
}

// response is the answer to a request.
type response struct {
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// SocketPath returns the watcher socket's path for the cache at root.
func SocketPath(root string) string { return filepath.Join(root, ledger.StateDir, SocketName) }

// sockAddr returns an address for the socket at path that fits a sockaddr_un
// (108 bytes on Linux): the path itself, or the path through the opened state
// directory (/proc/self/fd/N/dirty.sock), whose closer the caller calls once the
// socket is bound or connected.
func sockAddr(path string) (string, func(), error) {
	if len(path) < 100 {
		return path, func() {}, nil
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)), func() { d.Close() }, nil
}

// Client talks to the watcher of one cache, if one runs.
type Client struct {
	path string
	// Timeout bounds each request; 0 means 10 s. A watcher that does not answer
	// in time is treated as absent: the commit scans the cache.
	Timeout time.Duration
}

// NewClient returns a client for the watcher of the cache at root.
func NewClient(root string) *Client { return &Client{path: SocketPath(root)} }

// ErrUnsupported is New's error where there is no watcher (not Linux).
var ErrUnsupported = errors.New("dirty set: no watcher on this platform (every commit scans the cache)")

// ErrNoWatcher means no watcher answers for the cache.
var ErrNoWatcher = errors.New("no watcher runs for this cache")

func (c *Client) do(ctx context.Context, req request) (*Snapshot, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr, done, err := sockAddr(c.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNoWatcher
		}
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", addr)
	done()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, ErrNoWatcher
		}
		return nil, fmt.Errorf("dirty set: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("dirty set: send %s: %w", req.Op, err)
	}
	var resp response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return nil, fmt.Errorf("dirty set: read the answer to %s: %w", req.Op, err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("dirty set: watcher: %s", resp.Error)
	}
	return resp.Snapshot, nil
}

// Snapshot asks the watcher for its set. ErrNoWatcher means none runs.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	s, err := c.do(ctx, request{Op: "snapshot"})
	if err == nil && s == nil {
		err = errors.New("dirty set: watcher answered without a snapshot")
	}
	return s, err
}

// Ack tells the watcher that a commit covered paths (full: the whole cache,
// scanned after snap was taken) and that they are committed or unchanged: the
// watcher forgets those that did not change again after snap.
func (c *Client) Ack(ctx context.Context, snap *Snapshot, full bool, paths []string) error {
	_, err := c.do(ctx, request{Op: "ack", Epoch: snap.Epoch, Seq: snap.Seq, Full: full, Paths: paths})
	return err
}

// Wait waits until a watcher answers for the cache (one just started), until ctx
// is done.
func (c *Client) Wait(ctx context.Context) error {
	for {
		_, err := c.do(ctx, request{Op: "ping"})
		if !errors.Is(err, ErrNoWatcher) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dirty set: no watcher answered: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Untrust tells the watcher that the cache's index changed without its files
// (a rebuild replaced it): its set is untrusted until the next full scan.
// ErrNoWatcher means none runs, and then there is nothing to tell.
func (c *Client) Untrust(ctx context.Context, reason string) error {
	_, err := c.do(ctx, request{Op: "untrust", Reason: reason})
	return err
}

// ForCommit asks the watcher of the cache at root which paths a commit must
// check. It returns the snapshot to acknowledge afterwards (nil when no watcher
// answered) and the paths: the trusted set plus hints, or nil, meaning scan the
// whole cache, with why. An error is only a watcher that answered wrongly; the
// commit then scans too.
func ForCommit(ctx context.Context, root string, hints []string) (snap *Snapshot, changed []string, why string, err error) {
	snap, err = NewClient(root).Snapshot(ctx)
	switch {
	case errors.Is(err, ErrNoWatcher):
		return nil, nil, err.Error(), nil
	case err != nil:
		return nil, nil, "the watch's dirty set is unavailable", err
	case !snap.Trusted:
		return snap, nil, snap.Reason, nil
	}
	return snap, Merge(snap.Paths, hints), "", nil
}

// AckCommit tells the watcher what a successful commit from ForCommit's answer
// covered: the whole cache (changed nil: it scanned after snap), or the paths
// it checked. A commit scoped to partitions covered only some of its paths:
// pass scoped, and nothing is acked (the next commit checks them again).
func AckCommit(ctx context.Context, root string, snap *Snapshot, changed []string, scoped bool) error {
	if snap == nil || scoped {
		return nil
	}
	return NewClient(root).Ack(ctx, snap, changed == nil, changed)
}

// Merge returns the sorted union of the snapshot's paths and hints (cleaned,
// slash-separated, relative to the cache; hints outside it are dropped), never
// nil: an empty set means nothing changed, not "scan".
func Merge(paths, hints []string) []string {
	out := append(make([]string, 0, len(paths)+len(hints)), paths...)
	for _, h := range hints {
		h = filepath.ToSlash(filepath.Clean(h))
		if h == "." || h == ".." || strings.HasPrefix(h, "../") || strings.HasPrefix(h, "/") {
			continue
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
