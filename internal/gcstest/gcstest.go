// Package gcstest runs fake-gcs-server (github.com/fsouza/fake-gcs-server) for
// tests, as a separate process serving the GCS JSON API over HTTP on loopback.
//
// The server is a tool of this module, built once per test process by
// internal/testtool. Linking fake-gcs-server's library (fakestorage: gRPC,
// OpenTelemetry, the cloud storage client) into the test binaries made them the
// largest of the suite, relinked on every go test.
//
// A test that asks for a server and cannot get one fails; it never skips.
package gcstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/testtool"
)

// StartTimeout bounds how long Start waits for a server to answer.
const StartTimeout = 30 * time.Second

// Server is a running fake-gcs-server with an in-memory backend.
type Server struct {
	url  string
	proc *testtool.Proc
}

// client makes the requests of Start, CreateBucket and GetObject.
var client = &http.Client{Timeout: 30 * time.Second}

// Start starts a fake-gcs-server with no buckets on a free loopback port and
// stops it when t's test ends. It fails t if the server does not answer within
// StartTimeout.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := testtool.Path("github.com/fsouza/fake-gcs-server")
	if err != nil {
		t.Fatalf("gcstest: %v", err)
	}
	for attempt := 1; ; attempt++ {
		s, err := start(bin)
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		// Another process may take the free port between our probe and the
		// server's bind: try another one.
		if !errors.Is(err, errAddrInUse) || attempt == 5 {
			t.Fatalf("gcstest: start fake-gcs-server: %v", err)
		}
	}
}

// URL is the server's base URL, http://127.0.0.1:port: the Endpoint of a
// gcs.Config, or the value of STORAGE_EMULATOR_HOST.
func (s *Server) URL() string { return s.url }

// CreateBucket creates the bucket name, failing t if it cannot.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(s.url+"/storage/v1/b?project=test", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("gcstest: create bucket %q: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("gcstest: create bucket %q: %s: %s", name, resp.Status, b)
	}
}

// GetObject returns the contents of the object name in bucket.
func (s *Server) GetObject(bucket, name string) ([]byte, error) {
	resp, err := client.Get(s.url + "/storage/v1/b/" + url.PathEscape(bucket) + "/o/" + url.PathEscape(name) + "?alt=media")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get gs://%s/%s: %s: %s", bucket, name, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

var errAddrInUse = errors.New("address in use")

// start runs bin on a free port and waits until it lists buckets.
func start(bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	proc, err := testtool.Start(bin, environ(), "-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
		"-backend", "memory", "-log-level", "error")
	if err != nil {
		return nil, err
	}
	s := &Server{url: "http://127.0.0.1:" + strconv.Itoa(port), proc: proc}
	err = proc.WaitReady(StartTimeout, 20*time.Millisecond, func() bool {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/storage/v1/b", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, testtool.ErrExited) && strings.Contains(proc.Output(), "address already in use"):
		return nil, fmt.Errorf("%w: port %d: %s", errAddrInUse, port, proc.Output())
	}
	return nil, fmt.Errorf("%s: %w", s.url, err)
}

// stop kills the server and waits for it to exit.
func (s *Server) stop() { s.proc.Kill() }

// freePort returns a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// environ is this process's environment without fake-gcs-server's own
// variables (FAKE_GCS_*), which would change its defaults.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAKE_GCS_") {
			env = append(env, kv)
		}
	}
	return env
}
