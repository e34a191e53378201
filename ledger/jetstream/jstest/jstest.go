// Package jstest starts embedded nats-servers with JetStream for tests: one node
// (RunServer) or a small cluster (RunCluster), each storing under t.TempDir() and
// listening on random loopback ports, shut down by t.Cleanup.
package jstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// startTimeout bounds server start-up and cluster formation.
const startTimeout = 20 * time.Second

// RunServer starts a single JetStream node and returns it with a connection to it.
func RunServer(t testing.TB) (*server.Server, *nats.Conn) {
	t.Helper()
	s := start(t, &server.Options{
		ServerName: "jstest",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   t.TempDir(),
		NoLog:      true,
		NoSigs:     true,
	})
	return s, Connect(t, s.ClientURL())
}

// RunCluster starts an n-node JetStream cluster (n ≥ 1; 3 for R3 streams), waits
// until it has a meta leader, and returns the servers with a connection that knows
// all of their URLs (connected to the first).
//
// A JetStream cluster needs its routes configured before it starts, so the route
// ports are chosen beforehand: at random below the kernel's ephemeral range
// (where outgoing connections do not take them), and chosen again if a server
// cannot listen on its port after all.
func RunCluster(t testing.TB, n int) ([]*server.Server, *nats.Conn) {
	t.Helper()
	if n < 1 {
		t.Fatalf("jstest: cluster of %d nodes", n)
	}
	var servers []*server.Server
	for attempt := 1; servers == nil; attempt++ {
		var err error
		if servers, err = startCluster(t, n); err != nil {
			if attempt == 3 {
				t.Fatalf("jstest: %v", err)
			}
			t.Logf("jstest: %v; trying other ports", err)
		}
	}
	deadline := time.Now().Add(startTimeout)
	for !hasMetaLeader(servers) {
		if time.Now().After(deadline) {
			t.Fatalf("jstest: %d-node cluster elected no JetStream meta leader within %v", n, startTimeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
	urls := make([]string, n)
	for i, s := range servers {
		urls[i] = s.ClientURL()
	}
	return servers, Connect(t, strings.Join(urls, ","))
}

// startCluster starts n clustered servers; if one is not ready, it shuts them all
// down and returns an error.
func startCluster(t testing.TB, n int) ([]*server.Server, error) {
	ports := routePorts(t, n)
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	servers := make([]*server.Server, 0, n)
	for i := range n {
		opts := &server.Options{
			ServerName: fmt.Sprintf("jstest-%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "jstest", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s, err := server.NewServer(opts)
		if err == nil {
			s.Start()
			servers = append(servers, s)
			if !s.ReadyForConnections(5 * time.Second) {
				err = fmt.Errorf("server %s (route port %d) not ready", opts.ServerName, ports[i])
			}
		}
		if err != nil {
			for _, s := range servers {
				s.Shutdown()
				s.WaitForShutdown()
			}
			return nil, err
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
	return servers, nil
}

// routePorts returns n distinct loopback ports in [20000, 32000), free a moment
// ago.
func routePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("jstest: no free route ports")
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

func hasMetaLeader(servers []*server.Server) bool {
	for _, s := range servers {
		if s.JetStreamIsLeader() {
			for _, o := range servers {
				if !o.JetStreamIsCurrent() {
					return false
				}
			}
			return true
		}
	}
	return false
}

// Connect opens another connection to url (comma-separated for a cluster),
// closed by t.Cleanup.
func Connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("jstest"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("jstest: connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func start(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("jstest: new server: %v", err)
	}
	s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(startTimeout) {
		t.Fatalf("jstest: server %s not ready within %v", opts.ServerName, startTimeout)
	}
	return s
}
