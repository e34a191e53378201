//go:build linux

package dirty

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/syncledger/syncledger/ledger"
)

// start runs a watcher on a new cache directory and returns it with a client
// that talks to it over its socket.
func start(t *testing.T, root string, cfg Config) (*Watcher, *Client) {
	t.Helper()
	if root == "" {
		root = t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, ledger.StateDir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Root = root
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	c := NewClient(root)
	waitUp(t, c)
	return w, c
}

// waitUp waits until the watcher answers on its socket.
func waitUp(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func snapshot(t *testing.T, c *Client) *Snapshot {
	t.Helper()
	s, err := c.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// trust acks a full scan, as a commit that scanned the cache does.
func trust(t *testing.T, c *Client) {
	t.Helper()
	s := snapshot(t, c)
	if err := c.Ack(context.Background(), s, true, nil); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); !s.Trusted || len(s.Paths) != 0 {
		t.Fatalf("after a full scan's ack: %+v, want trusted and empty", s)
	}
}

func wantPaths(t *testing.T, s *Snapshot, want ...string) {
	t.Helper()
	if !s.Trusted {
		t.Fatalf("snapshot untrusted (%s), want trusted", s.Reason)
	}
	for _, p := range want {
		if !slices.Contains(s.Paths, p) {
			t.Errorf("snapshot lacks %q: %q", p, s.Paths)
		}
	}
}

// TestNewWatcherUntrusted: a watcher knows nothing of the changes made before
// it started (or while none ran), so its first answer is untrusted, and only a
// full scan's ack of its own epoch makes it trusted.
func TestNewWatcherUntrusted(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, ".syncledger/x", "")
	write(t, root, "a/changed-while-no-watcher-ran", "1")
	_, c := start(t, root, Config{})
	s := snapshot(t, c)
	if s.Trusted || s.Reason == "" {
		t.Fatalf("first snapshot = %+v, want untrusted with a reason", s)
	}
	if err := c.Ack(context.Background(), &Snapshot{Epoch: "another-run", Seq: s.Seq + 100}, true, nil); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); s.Trusted {
		t.Fatal("an ack of another watcher's epoch made the set trusted")
	}
	trust(t, c)
}

// TestNoEventMissed: every change made before a snapshot request is in its
// answer (the barrier), round after round, in nested and new directories.
func TestNoEventMissed(t *testing.T) {
	t.Parallel()
	w, c := start(t, "", Config{})
	trust(t, c)
	for i := range 200 {
		var want []string
		for j := range 3 {
			rel := fmt.Sprintf("m%d/d%d/f%d", i%7, j, i)
			write(t, w.root, rel, "x")
			want = append(want, rel)
		}
		if i%10 == 0 {
			rel := fmt.Sprintf("new%d/deep/er/file", i)
			write(t, w.root, rel, "y") // MkdirAll then write, at once
			want = append(want, rel)
		}
		s := snapshot(t, c)
		wantPaths(t, s, want...)
		if t.Failed() {
			t.Fatalf("round %d", i)
		}
		if err := c.Ack(context.Background(), s, false, s.Paths); err != nil {
			t.Fatal(err)
		}
	}
	if s := snapshot(t, c); len(s.Paths) != 0 {
		t.Errorf("after acking every path: %q", s.Paths)
	}
}

// TestAckKeepsLaterChanges: a path changed again after the snapshot an ack
// refers to stays in the set.
func TestAckKeepsLaterChanges(t *testing.T) {
	t.Parallel()
	w, c := start(t, "", Config{})
	trust(t, c)
	write(t, w.root, "a", "1")
	write(t, w.root, "b", "1")
	s := snapshot(t, c)
	write(t, w.root, "a", "2") // after the snapshot, before the ack
	if err := c.Ack(context.Background(), s, false, s.Paths); err != nil {
		t.Fatal(err)
	}
	s2 := snapshot(t, c)
	if !slices.Equal(s2.Paths, []string{"a"}) {
		t.Fatalf("after the ack: %q, want [a]", s2.Paths)
	}
	// A full ack of the old snapshot keeps it as well.
	if err := c.Ack(context.Background(), s, true, nil); err != nil {
		t.Fatal(err)
	}
	if s3 := snapshot(t, c); !slices.Equal(s3.Paths, []string{"a"}) {
		t.Fatalf("after a full ack of the older snapshot: %q, want [a]", s3.Paths)
	}
}

// TestRenameOverFile: replacing a file by renaming another over it (how editors
// and swamp write) names both paths.
func TestRenameOverFile(t *testing.T) {
	t.Parallel()
	w, c := start(t, "", Config{})
	write(t, w.root, "d/target", "old")
	write(t, w.root, "d/.tmp-1", "new")
	trust(t, c)
	if err := os.Rename(filepath.Join(w.root, "d/.tmp-1"), filepath.Join(w.root, "d/target")); err != nil {
		t.Fatal(err)
	}
	wantPaths(t, snapshot(t, c), "d/target", "d/.tmp-1")
}

// TestDirectoryMovedIn: a directory moved into the cache brings files that had
// no event each: the set is untrusted until a full scan. Its subtree is watched
// from then on.
func TestDirectoryMovedIn(t *testing.T) {
	t.Parallel()
	w, c := start(t, "", Config{})
	trust(t, c)
	outside := t.TempDir()
	write(t, outside, "batch/x/1", "1")
	write(t, outside, "batch/2", "2")
	if err := os.Rename(filepath.Join(outside, "batch"), filepath.Join(w.root, "batch")); err != nil {
		t.Fatal(err)
	}
	s := snapshot(t, c)
	if s.Trusted || !strings.Contains(s.Reason, "moved") {
		t.Fatalf("after a directory moved in: %+v, want untrusted (moved)", s)
	}
	trust(t, c)
	write(t, w.root, "batch/x/1", "changed")
	wantPaths(t, snapshot(t, c), "batch/x/1")

	// Moved out (or renamed inside): its watches follow it under a stale name.
	if err := os.Rename(filepath.Join(w.root, "batch"), filepath.Join(outside, "gone")); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); s.Trusted {
		t.Fatalf("after a directory moved out: %+v, want untrusted", s)
	}
	trust(t, c)
	write(t, outside, "gone/x/1", "not ours")
	if s := snapshot(t, c); len(s.Paths) != 0 {
		t.Fatalf("a change outside the cache is in its set: %q", s.Paths)
	}
}

// TestOverflow: a real kernel queue overflow (the reader held while more events
// than fs.inotify.max_queued_events arrive) makes the set untrusted; a full
// scan acked after it makes it trusted again; one acked before does not.
func TestOverflow(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, ".syncledger/x", "")
	paused := make(chan struct{})
	w, err := New(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	w.paused = make(chan struct{})
	close(w.paused) // runs freely until the test swaps it
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	c := NewClient(root)
	waitUp(t, c)
	trust(t, c)
	before := snapshot(t, c)

	max := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		fmt.Sscan(string(b), &max)
	}
	// Hold the reader: it waits on paused before its next read. The read in
	// progress ends with the next event, so make one and let it be read.
	w.mu.Lock()
	w.paused = paused
	w.mu.Unlock()
	write(t, root, "wake", "")
	// Once wake is recorded, the read that returned it is done: the reader's
	// next step is to wait on paused, which it loads after the swap above.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		_, read := w.paths["wake"]
		w.mu.Unlock()
		if read {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reader never read the wake event")
		}
	}
	for i := range max + 100 {
		f, err := os.Create(filepath.Join(root, fmt.Sprintf("f%05d", i%500)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	close(paused)
	s := snapshot(t, c)
	if s.Trusted || !strings.Contains(s.Reason, "overflow") {
		t.Fatalf("after %d events with the reader held: %+v, want untrusted (overflow)", max+100, s)
	}
	if err := c.Ack(context.Background(), before, true, nil); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); s.Trusted {
		t.Fatal("a full scan acked from before the overflow made the set trusted")
	}
	trust(t, c)
}

// TestRestart: a watcher that stops and starts again (a restarted watch) is a
// new epoch: untrusted, and deaf to acks of the old one; a change made while
// none ran is never reported as unchanged.
func TestRestart(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, ".syncledger/x", "")
	w1, err := New(Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()
	c := NewClient(root)
	waitUp(t, c)
	trust(t, c)
	old := snapshot(t, c)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(context.Background()); err != ErrNoWatcher {
		t.Fatalf("Snapshot with no watcher = %v, want ErrNoWatcher", err)
	}
	write(t, root, "changed-while-none-ran", "x")

	_, c2 := start(t, root, Config{})
	s := snapshot(t, c2)
	if s.Trusted || s.Epoch == old.Epoch {
		t.Fatalf("restarted watcher: %+v, want untrusted, new epoch", s)
	}
	if err := c2.Ack(context.Background(), &Snapshot{Epoch: old.Epoch, Seq: 1 << 40}, true, nil); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c2); s.Trusted {
		t.Fatal("an ack of the old epoch made the new watcher trusted")
	}
}

// TestOneWatcherPerCache: a second watcher on the same cache refuses to run; a
// stale socket (a watcher killed) does not stop a new one.
func TestOneWatcherPerCache(t *testing.T) {
	t.Parallel()
	w, _ := start(t, "", Config{})
	w2, err := New(Config{Root: w.root})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "another watcher") {
		t.Fatalf("second watcher's Run = %v, want another watcher", err)
	}

	root := t.TempDir()
	write(t, root, ".syncledger/x", "")
	if err := os.WriteFile(SocketPath(root), nil, 0o600); err != nil { // stale, nobody listens
		t.Fatal(err)
	}
	start(t, root, Config{})
}

// TestUntrust: a rebuild tells the watcher the index changed without its
// files; an ack of a snapshot from before that does not restore trust.
func TestUntrust(t *testing.T) {
	t.Parallel()
	_, c := start(t, "", Config{})
	trust(t, c)
	before := snapshot(t, c)
	if err := c.Untrust(context.Background(), "the cache was rebuilt"); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); s.Trusted || s.Reason != "the cache was rebuilt" {
		t.Fatalf("after Untrust: %+v", s)
	}
	if err := c.Ack(context.Background(), before, true, nil); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); s.Trusted {
		t.Fatal("an ack of a snapshot from before Untrust restored trust")
	}
	trust(t, c)
}

// TestMaxPaths: past MaxPaths the set is dropped and untrusted, not grown.
func TestMaxPaths(t *testing.T) {
	t.Parallel()
	w, c := start(t, "", Config{MaxPaths: 10})
	trust(t, c)
	for i := range 11 {
		write(t, w.root, fmt.Sprintf("f%d", i), "x")
	}
	if s := snapshot(t, c); s.Trusted || w.Len() > 10 {
		t.Fatalf("after 11 paths with MaxPaths 10: trusted %v, %d paths", s.Trusted, w.Len())
	}
}

// TestLongSocketPath: a cache whose socket path is too long for sockaddr_un.
func TestLongSocketPath(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	write(t, root, ".syncledger/x", "")
	w, c := start(t, root, Config{})
	trust(t, c)
	write(t, w.root, "f", "x")
	wantPaths(t, snapshot(t, c), "f")
}

func TestMerge(t *testing.T) {
	t.Parallel()
	if got := Merge(nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("Merge(nil, nil) = %#v, want empty and not nil (nil means scan)", got)
	}
	got := Merge([]string{"b", "a/x"}, []string{"a/x", "./c", "../out", "/abs", "d/../e"})
	if want := []string{"a/x", "b", "c", "e"}; !slices.Equal(got, want) {
		t.Fatalf("Merge = %q, want %q", got, want)
	}
}

// TestMaxDirs: a cache with more directories than MaxDirs is not watched
// past it, and its set is never trusted (every commit scans the cache).
func TestMaxDirs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write(t, root, ".syncledger/x", "")
	for _, d := range []string{"a", "b", "c"} {
		write(t, root, d+"/f", "1")
	}
	w, c := start(t, root, Config{MaxDirs: 3})
	if n := len(w.wds); n > 3 {
		t.Fatalf("%d directories watched, want at most 3", n)
	}
	s := snapshot(t, c)
	if err := c.Ack(context.Background(), s, true, nil); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, c); s.Trusted || !strings.Contains(s.Reason, "more than 3 directories") {
		t.Fatalf("a cache past MaxDirs after a full scan's ack: %+v, want untrusted, naming the bound", s)
	}
}

// TestUnseenAlwaysListed is issue 26 point 8: an edit made through a hard
// link from outside the cache raises no inotify event in it, so a commit
// from the dirty set said "nothing to commit" while status listed the file.
// Now a file with more than one link is in every snapshot (found when the
// set becomes trusted); a link made in the cache after that makes the set
// untrusted (the file's other names are not known) until the next full scan,
// which then lists every name; a mount point inside the cache is in every
// snapshot too.
func TestUnseenAlwaysListed(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	write(t, root, ".syncledger/x", "")
	write(t, root, "m/linked", "1")
	write(t, root, "m/plain", "1")
	if err := os.Link(filepath.Join(root, "m/linked"), filepath.Join(outside, "link")); err != nil {
		t.Fatal(err)
	}
	_, c := start(t, root, Config{})
	s := snapshot(t, c)
	if err := c.Ack(context.Background(), s, true, nil); err != nil {
		t.Fatal(err)
	}
	// The edit through the outside name: no event names m/linked.
	if err := os.WriteFile(filepath.Join(outside, "link"), []byte("edited outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = snapshot(t, c)
	wantPaths(t, s, "m/linked")
	if slices.Contains(s.Paths, "m/plain") {
		t.Fatalf("a file with one link is listed: %q", s.Paths)
	}

	// A second name made in the cache: its first name is not known.
	if err := os.Link(filepath.Join(root, "m/plain"), filepath.Join(root, "n/second")); err == nil {
		t.Fatal("link into a missing directory succeeded")
	}
	write(t, root, "n/.keep", "")
	if err := os.Link(filepath.Join(root, "m/plain"), filepath.Join(root, "n/second")); err != nil {
		t.Fatal(err)
	}
	if s = snapshot(t, c); s.Trusted || !strings.Contains(s.Reason, "n/second") {
		t.Fatalf("after a link made in the cache: %+v, want untrusted naming n/second", s)
	}
	if err := c.Ack(context.Background(), s, true, nil); err != nil {
		t.Fatal(err)
	}
	wantPaths(t, snapshot(t, c), "m/linked", "m/plain", "n/second")
}

// TestMountPointListed: a file system mounted inside the cache (here a bind
// mount) reports nothing to the watches of the directory it covers, so its
// mount point is in every snapshot.
func TestMountPointListed(t *testing.T) {
	t.Parallel()
	root, other := t.TempDir(), t.TempDir()
	write(t, root, ".syncledger/x", "")
	write(t, root, "mnt/covered", "")
	_, c := start(t, root, Config{})
	trust(t, c)
	if err := unix.Mount(other, filepath.Join(root, "mnt"), "", unix.MS_BIND, ""); err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("bind mount needs root: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(root, "mnt"), unix.MNT_DETACH) })
	write(t, other, "through-the-mount", "x")
	wantPaths(t, snapshot(t, c), "mnt")
}
