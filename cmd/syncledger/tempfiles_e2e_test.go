package main

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/syncledger/syncledger/ledger"
)

// stallingS3 is an S3 server (gofakes3, in this process) that, while armed,
// sends the first half of any object whose key contains match and then holds the
// rest until open is called: a download caught in the middle, for as long as
// the test needs.
type stallingS3 struct {
	url   string
	match atomic.Value // string: the key to stall, once armed
	gate  chan struct{}
	once  sync.Once
}

func newStallingS3(t *testing.T) *stallingS3 {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("ledger"); err != nil {
		t.Fatal(err)
	}
	s := &stallingS3{gate: make(chan struct{})}
	fake := gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := s.match.Load().(string); r.Method == http.MethodGet && m != "" && strings.Contains(r.URL.Path, m) {
			w = &stallingWriter{ResponseWriter: w, gate: s.gate}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(s.open)
	s.url = "s3://ledger/blobs?endpoint=" + srv.URL + "&region=us-east-1&path-style=true"
	return s
}

func (s *stallingS3) open() { s.once.Do(func() { close(s.gate) }) }

var s3Env = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true"}

// stallingWriter writes half of the first body write, flushes it, and waits for gate.
type stallingWriter struct {
	http.ResponseWriter
	gate    chan struct{}
	stalled bool
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	if w.stalled || len(p) < 2 {
		return w.ResponseWriter.Write(p)
	}
	w.stalled = true
	n, err := w.ResponseWriter.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	w.ResponseWriter.(http.Flusher).Flush()
	<-w.gate
	m, err := w.ResponseWriter.Write(p[len(p)/2:])
	return n + m, err
}

// waitTempFile waits until cache's .syncledger/tmp holds a temp file with some content.
func waitTempFile(t *testing.T, cache string) {
	t.Helper()
	dir := filepath.Join(cache, ledger.StateDir, "tmp")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Size() > 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no temp file under %s after 60s: the download never started", dir)
}

// A process removes leftover temp files only while it holds the cache's lock,
// never another running process's write in progress (#14 point 6). A `watch` or
// `sync` is caught in the middle of downloading a large file (its temp file half
// written under .syncledger/tmp); then `status`, `commit` or a second `sync`
// starts on the same cache. Before, the second process emptied the temp
// directory as it opened the cache and the first failed at its rename ("no such
// file or directory"); now it waits for the lock, and both succeed.
func TestTempFilesBesideAnotherProcessCLI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		first, other []string
	}{
		{"status beside watch", []string{"watch"}, []string{"status"}},
		{"commit beside watch", []string{"watch"}, []string{"commit"}},
		{"two syncs", []string{"sync"}, []string{"sync"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case waits on its own server and processes
			s3 := newStallingS3(t)
			c := newCLI(t, "tempfiles")
			c.env = append(c.env, s3Env...)
			c.ok("init", "--blobs", s3.url)
			remote, local := t.TempDir(), t.TempDir()
			big := make([]byte, 4<<20)
			rand.Read(big)
			put(t, remote, "data/big.bin", string(big))
			put(t, remote, "audit/small", "small")
			c.ok("--cache", remote, "--host", "remote", "commit")
			s3.match.Store(ledger.DigestOf(big).String())

			first := startProc(t, c.env, append([]string{"--cache", local, "--host", "local"}, tc.first...)...)
			waitTempFile(t, local)
			other := startProc(t, c.env, append([]string{"--cache", local, "--host", "local"}, tc.other...)...)
			// Give the other process time to open the cache (where the old code
			// emptied the temp directory); with the fix it waits for the lock.
			select {
			case <-other.done:
			case <-time.After(3 * time.Second):
			}
			s3.open()

			if tc.first[0] == "watch" {
				first.line(t, `^applied seq \d+:`)
				if code := first.stop(t, syscall.SIGTERM); code != 0 {
					t.Fatalf("watch exit %d; stderr:\n%s", code, first.stderr)
				}
			} else if code := first.stop(t, syscall.Signal(0)); code != 0 {
				t.Fatalf("first sync exit %d; stderr:\n%s", code, first.stderr)
			}
			if code := other.stop(t, syscall.Signal(0)); code != 0 {
				t.Fatalf("%s beside %s: exit %d; stderr:\n%s", tc.other[0], tc.first[0], code, other.stderr)
			}
			if !bytes.Equal([]byte(tree(t, local)["data/big.bin"]), big) {
				t.Fatal("data/big.bin differs after the apply")
			}
			c.ok("--cache", local, "--host", "local", "sync")
			c.ok("--cache", local, "--host", "local", "verify")
			if diff := cmp.Diff(tree(t, remote), tree(t, local)); diff != "" {
				t.Fatalf("caches differ (-remote +local):\n%s", diff)
			}
			if st := c.status(local); st.HWM != st.Head {
				t.Fatalf("hwm %d, head %d", st.HWM, st.Head)
			}
			if ents, _ := os.ReadDir(filepath.Join(local, ledger.StateDir, "tmp")); len(ents) != 0 {
				t.Fatalf("temp files left: %v", ents)
			}
		})
	}
}
