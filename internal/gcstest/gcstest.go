// Package gcstest runs fake-gcs-server (github.com/fsouza/fake-gcs-server) for
// tests, as a separate process serving the GCS JSON API over HTTP on loopback.
//
// The server is a tool of this module (the tool directive in go.mod): the first
// Start in a test process has the go command build it (`go tool -n`, which keeps
// the linked executable in the build cache, so an unchanged module costs no
// compile and no link) and every Start runs it. Linking fake-gcs-server's
// library (fakestorage: gRPC, OpenTelemetry, the cloud storage client) into the
// test binaries made them the largest of the suite, relinked on every go test.
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
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/testmain"
)

// StartTimeout bounds how long Start waits for a server to answer.
const StartTimeout = 30 * time.Second

// Server is a running fake-gcs-server with an in-memory backend.
type Server struct {
	url    string
	cmd    *exec.Cmd
	stderr *testmain.SyncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // the process's exit, once done is closed
}

// client makes the requests of Start, CreateBucket and GetObject.
var client = &http.Client{Timeout: 30 * time.Second}

// Start starts a fake-gcs-server with no buckets on a free loopback port and
// stops it when t's test ends. It fails t if the server does not answer within
// StartTimeout.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binary()
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
	s := &Server{url: "http://127.0.0.1:" + strconv.Itoa(port), stderr: &testmain.SyncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
		"-backend", "memory", "-log-level", "error")
	s.cmd.Env = environ()
	s.cmd.Stdout = s.stderr
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()

	deadline := time.Now().Add(StartTimeout)
	for {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/storage/v1/b", nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			out := s.stderr.String()
			if strings.Contains(out, "address already in use") {
				return nil, fmt.Errorf("%w: port %d: %s", errAddrInUse, port, out)
			}
			return nil, fmt.Errorf("exited before answering (%v); its output:\n%s", s.err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("no answer on %s within %v; its output:\n%s", s.url, StartTimeout, s.stderr.String())
		}
	}
}

// stop kills the server and waits for it to exit.
func (s *Server) stop() {
	s.cmd.Process.Kill()
	<-s.done
}

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

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary returns the path of the fake-gcs-server executable, built once per
// test process.
func binary() (string, error) {
	binOnce.Do(func() { binPath, binErr = build() })
	return binPath, binErr
}

// build has the go command build the fake-gcs-server tool (from the module
// the test runs in) and returns the path of the executable in the build cache.
// Test processes of several packages may ask at once: a file lock lets the
// first build while the others wait, then find it cached.
func build() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	unlock := lockFile(filepath.Join(os.TempDir(), "syncledger-gcstest.lock"))
	defer unlock()
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "tool", "-n", "github.com/fsouza/fake-gcs-server")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build fake-gcs-server (go tool -n): %v\n%s", err, stderr.Bytes())
	}
	// -n prints the command go tool would run: the cached executable.
	path := strings.TrimSpace(string(out))
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("build fake-gcs-server: go tool -n printed %q, not an executable (%v)", path, err)
	}
	return path, nil
}
