// Package natsjstest runs nats-servers with JetStream for tests: one node
// (RunServer) or a small cluster (RunCluster), each storing under t.TempDir()
// and listening on random loopback ports, killed by t.Cleanup.
//
// Each server is a process: nats-server is a tool of this module (the tool
// directive in go.mod), built once per test process by internal/testtool, so
// the test binaries link only the client. Linking the server into them made
// each twice as large and cost a second or more of CPU per test binary on a
// fresh clone; a server process costs a few milliseconds more to start than an
// embedded one.
package natsjstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/testtool"
)

// Tool is the nats-server package the tool directive in go.mod names.
const Tool = "github.com/nats-io/nats-server/v2"

// startTimeout bounds server start-up and cluster formation.
const startTimeout = 20 * time.Second

// Server is a nats-server process with JetStream. It keeps its port and its
// store across Shutdown or Kill and Restart, as a restarted server does.
type Server struct {
	t     testing.TB
	bin   string
	name  string
	store string   // JetStream's store directory
	extra []string // the cluster's flags
	conf  string   // a configuration file (RunServerConfig)
	port  int      // the client port, once known
	mon   int      // the monitoring port (cluster nodes), once known
	proc  *testtool.Proc
}

// RunServer starts a single JetStream node and returns it with a connection to it.
func RunServer(t testing.TB) (*Server, *nats.Conn) {
	t.Helper()
	s := newServer(t, "natsjstest")
	if err := s.start(); err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s, Connect(t, s.ClientURL())
}

// StoreDir is the server's JetStream store directory (a test copies it, or
// puts a copy back, while the server is stopped).
func (s *Server) StoreDir() string { return s.store }

// RunServerConfig starts a single JetStream node that also reads the
// configuration file conf (its users and their permissions, say; the
// command line's address, port and store win). It returns no connection: the
// configuration may require credentials.
func RunServerConfig(t testing.TB, conf string) *Server {
	t.Helper()
	s := newServer(t, "natsjstest")
	s.conf = conf
	if err := s.start(); err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// ClientURL is the server's client URL, nats://127.0.0.1:port.
func (s *Server) ClientURL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Shutdown stops the server as an operator does (SIGTERM: it closes its
// clients and its store) and waits for it to exit. It is a no-op on a server
// that is not running.
func (s *Server) Shutdown() {
	if s.proc != nil {
		s.proc.Stop(10 * time.Second)
		s.proc = nil
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit. It is a no-op on a
// server that is not running.
func (s *Server) Kill() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Restart starts a stopped server again, on its port and with its store. It
// fails the test if the server does not come up.
func (s *Server) Restart() {
	s.t.Helper()
	if s.proc != nil {
		s.t.Fatalf("natsjstest: Restart of %s, which is running", s.name)
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("natsjstest: restart: %v", err)
	}
}

func newServer(t testing.TB, name string) *Server {
	t.Helper()
	bin, err := testtool.Path(Tool)
	if err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
	return &Server{t: t, bin: bin, name: name, store: t.TempDir()}
}

// start runs the server and waits until it listens: on its port once it has
// one, else on one it picks and reports in its ports file.
func (s *Server) start() error {
	ports := filepath.Join(s.store, "ports")
	if err := os.MkdirAll(ports, 0o755); err != nil {
		return err
	}
	port := -1
	if s.port != 0 {
		port = s.port
	}
	var args []string
	if s.conf != "" {
		args = []string{"-c", s.conf}
	}
	args = append(append(args, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-n", s.name,
		"-js", "-sd", s.store, "--ports_file_dir", ports), s.extra...)
	proc, err := testtool.Start(s.bin, nil, args...)
	if err != nil {
		return err
	}
	var perr error
	err = proc.WaitReady(startTimeout, 5*time.Millisecond, func() bool {
		// The file is named <executable>_<pid>.ports.
		names, _ := filepath.Glob(filepath.Join(ports, fmt.Sprintf("*_%d.ports", proc.Pid())))
		if len(names) == 0 {
			return false
		}
		info, err := readPorts(names[0])
		if err != nil {
			return false
		}
		if s.port, perr = portOf(info.Nats); perr == nil && len(s.extra) > 0 {
			s.mon, perr = portOf(info.Monitoring)
		}
		return true
	})
	if err == nil && perr != nil {
		proc.Kill()
		err = perr
	}
	if err != nil {
		return fmt.Errorf("server %s: %w", s.name, err)
	}
	s.proc = proc
	return nil
}

// portsInfo is the part of nats-server's ports file (--ports_file_dir) read here.
type portsInfo struct {
	Nats       []string `json:"nats"`
	Monitoring []string `json:"monitoring"`
}

// readPorts reads a ports file. The server writes it after it listens, not
// atomically: a file not yet whole is an error to retry.
func readPorts(name string) (portsInfo, error) {
	var info portsInfo
	b, err := os.ReadFile(name)
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, err
	}
	if len(info.Nats) == 0 {
		return info, errors.New("no client URL yet")
	}
	return info, nil
}

// portOf returns the port of the first URL in urls.
func portOf(urls []string) (int, error) {
	if len(urls) == 0 {
		return 0, errors.New("ports file lists no URL")
	}
	i := strings.LastIndexByte(urls[0], ':')
	p, err := strconv.Atoi(urls[0][i+1:])
	if i < 0 || err != nil {
		return 0, fmt.Errorf("ports file URL %q has no port", urls[0])
	}
	return p, nil
}

// RunCluster starts an n-node JetStream cluster (n ≥ 1; 3 for R3 streams), waits
// until every node reports itself healthy (a JetStream meta leader elected and
// the node current with it), and returns the servers with a connection that
// knows all of their URLs (connected to the first).
//
// A JetStream cluster needs its routes configured before it starts, so the route
// ports are chosen beforehand: at random below the kernel's ephemeral range
// (where outgoing connections do not take them), and chosen again if a server
// cannot listen on its port after all.
func RunCluster(t testing.TB, n int) ([]*Server, *nats.Conn) {
	t.Helper()
	if n < 1 {
		t.Fatalf("natsjstest: cluster of %d nodes", n)
	}
	var servers []*Server
	for attempt := 1; servers == nil; attempt++ {
		var err error
		if servers, err = startCluster(t, n); err != nil {
			if attempt == 3 {
				t.Fatalf("natsjstest: %v", err)
			}
			t.Logf("natsjstest: %v; trying other ports", err)
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Kill()
		}
	})
	deadline := time.Now().Add(startTimeout)
	for _, s := range servers {
		for !s.healthy() {
			if time.Now().After(deadline) {
				t.Fatalf("natsjstest: %d-node cluster: %s not healthy (no JetStream meta leader, or not current) within %v; its output:\n%s",
					n, s.name, startTimeout, s.proc.Output())
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	urls := make([]string, n)
	for i, s := range servers {
		urls[i] = s.ClientURL()
	}
	return servers, Connect(t, strings.Join(urls, ","))
}

// startCluster starts n clustered servers; if one does not come up, it kills
// them all and returns an error.
func startCluster(t testing.TB, n int) ([]*Server, error) {
	ports := routePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	servers := make([]*Server, 0, n)
	for i := range n {
		s := newServer(t, fmt.Sprintf("natsjstest-%d", i+1))
		s.extra = []string{"-m", "-1", "--cluster_name", "natsjstest",
			"--cluster", routes[i], "--routes", strings.Join(routes, ",")}
		if err := s.start(); err != nil {
			for _, s := range servers {
				s.Kill()
			}
			return nil, fmt.Errorf("route port %d: %w", ports[i], err)
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// healthy reports whether the server's /healthz answers OK: JetStream is up,
// the cluster has a meta leader, and this server is current with it.
func (s *Server) healthy() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", s.mon))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// routePorts returns n distinct loopback ports in [20000, 32000), free a moment
// ago.
func routePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("natsjstest: no free route ports")
		}
		p := 20000 + rand.IntN(12000)
		if slices.Contains(ports, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	return ports
}

// Connect opens another connection to url (comma-separated for a cluster),
// closed by t.Cleanup.
func Connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("natsjstest"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("natsjstest: connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// RSS is the server process's resident memory in bytes (Linux: VmRSS of
// /proc/PID/status), for the benchmarks that state a server's memory.
func (s *Server) RSS() (int64, error) {
	if s.proc == nil {
		return 0, fmt.Errorf("natsjstest: server %s is not running", s.name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.proc.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("natsjstest: no VmRSS for server %s", s.name)
}
