package natsjstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/faulty"
)

// Regions is two regions of one deployment: the origin's server, in
// JetStream domain OriginDomain, and a server near region B's hosts, in
// domain MirrorDomain, a leaf node of the origin's (where a ledger's mirror
// lives: natsjs.Client.CreateMirror). Between them, fault proxies stand for
// the far link: Link carries the leaf node connection (B → origin), Far the
// connections region B's hosts make to the origin's client port (their
// writes). SetRTT makes both a far link; their Stall, DropAll and
// SetRefusing cut region B off.
type Regions struct {
	Origin, Mirror             *Server
	Link, Far                  *faulty.Proxy
	OriginDomain, MirrorDomain string
}

// Domains of RunRegions.
const (
	OriginDomain = "hub"
	MirrorDomain = "eu"
)

// RunRegions starts the origin's server and region B's (see Regions), and
// waits for the leaf node connection.
func RunRegions(t testing.TB) *Regions {
	t.Helper()
	dir := t.TempDir()
	leafPort := freePort(t)
	// no_advertise: the leaf node must keep to the proxy, not learn the
	// origin's own leaf node address.
	origin := filepath.Join(dir, "origin.conf")
	write(t, origin, fmt.Sprintf("jetstream { domain: %s }\nleafnodes { listen: \"127.0.0.1:%d\", no_advertise: true }\n", OriginDomain, leafPort))
	r := &Regions{OriginDomain: OriginDomain, MirrorDomain: MirrorDomain}
	r.Origin = RunServerConfig(t, origin)
	var err error
	if r.Link, err = faulty.NewProxy(fmt.Sprintf("127.0.0.1:%d", leafPort)); err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
	t.Cleanup(func() { r.Link.Close() })
	if r.Far, err = faulty.NewProxy(fmt.Sprintf("127.0.0.1:%d", r.Origin.port)); err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
	t.Cleanup(func() { r.Far.Close() })
	mirror := filepath.Join(dir, "mirror.conf")
	write(t, mirror, fmt.Sprintf("jetstream { domain: %s }\nleafnodes { reconnect: \"100ms\", remotes: [ { url: \"nats-leaf://%s\" } ] }\n", MirrorDomain, r.Link.Addr()))
	r.Mirror = RunServerConfig(t, mirror)
	r.WaitLinked(t)
	return r
}

// FarURL is the origin's client URL as region B reaches it (through Far).
func (r *Regions) FarURL() string { return r.Far.URL() }

// SetRTT makes the link between the regions a round trip of d (d/2 each
// way) on both proxies.
func (r *Regions) SetRTT(d time.Duration) {
	r.Link.SetDelay(d/2, d/2)
	r.Far.SetDelay(d/2, d/2)
}

// WaitLinked waits until the leaf node connection is up: the origin's
// domain answers through region B's server.
func (r *Regions) WaitLinked(t testing.TB) {
	t.Helper()
	nc := Connect(t, r.Mirror.ClientURL())
	defer nc.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		if _, err := nc.Request("$JS."+r.OriginDomain+".API.INFO", nil, time.Second); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natsjstest: region B's leaf node did not reach the origin within %v", startTimeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func write(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
}

// freePort returns a loopback port free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natsjstest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
