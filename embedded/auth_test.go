package embedded

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/embedded/embeddedtest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// violations records the asynchronous errors of a connection: the server
// answers a refused publish with "-ERR 'Permissions Violation …'", never with an
// error reply to the request. Waiting for one does not consume it, so refused
// operations can run at once and their violations be looked for afterwards.
type violations struct {
	mu   sync.Mutex
	errs []error
	more chan struct{} // closed (and replaced) when an error arrives
}

func newViolations() *violations { return &violations{more: make(chan struct{})} }

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err)
	close(v.more)
	v.more = make(chan struct{})
}

// wait returns the first permissions violation mentioning want, waiting up to
// five seconds for it.
func (v *violations) wait(t *testing.T, want string) error {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		v.mu.Lock()
		for _, err := range v.errs {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
				v.mu.Unlock()
				return err
			}
		}
		more := v.more
		v.mu.Unlock()
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("no permissions violation mentioning %q", want)
		}
	}
}

// connectT connects to s without reconnecting, closed at the end of the test;
// a non-nil v collects the connection's permission violations.
func connectT(t *testing.T, s *Server, v *violations, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append(opts, nats.MaxReconnects(0))
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func perms(t *testing.T, role natsauth.Role, s natsauth.Scope) *natsauth.Permissions {
	t.Helper()
	p, err := natsauth.For(role, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func event(t *testing.T, uuid, host, path string, prev ledger.Record) ledger.Event {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Event{V: ledger.FormatVersion, Ledger: uuid, Commit: id, Host: host, At: time.Now(),
		Partition: ledger.PartitionKey(path), ModelSeq: prev.Event.ModelSeq + 1, Prev: prev.Seq, Parts: 1, Part: 1,
		Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: int64(len(path)), Mode: 0o644}}}
}

// TestToolingUserCannotCommit runs the embedded server with the permission
// templates of natsauth: the host user commits, the read-only tooling user reads
// the commit but its own commit is refused by the server, and neither can delete
// or purge the ledger's stream.
func TestToolingUserCannotCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	scope := natsauth.Scope{Ledger: "perm"}
	hostKey := embeddedtest.NewNkey(t)
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), User: "admin", Password: "admin-pw",
		Users: []User{
			{Nkey: hostKey.Public, Permissions: perms(t, natsauth.RoleHost, scope)},
			{Name: "grafana", Password: "tooling-pw", Permissions: perms(t, natsauth.RoleTooling, scope)},
		}})
	connect := func(v *violations, opts ...nats.Option) *nats.Conn { return connectT(t, s, v, opts...) }
	quick := []natsjs.Option{natsjs.WithTimeout(300 * time.Millisecond), natsjs.WithRetry(1, 0)}

	// The administrator creates the ledger (serve's internal user would too).
	admin := connect(nil, nats.UserInfo("admin", "admin-pw"))
	if _, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: "perm", UUID: "0190b0a1-0000-4000-8000-000000000001", Blobs: "file:///b"}); err != nil {
		t.Fatal(err)
	}

	// The host user commits and records its heartbeat (creating the bucket).
	hostNkey, err := nats.NkeyOptionFromSeed(writeSeed(t, hostKey.Seed))
	if err != nil {
		t.Fatal(err)
	}
	hostV := newViolations()
	hc := connect(hostV, hostNkey)
	hl, err := natsjs.OpenLog(ctx, hc, "perm")
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := hl.Append(ctx, []ledger.Event{event(t, hl.UUID(), "h1", "audit/one", ledger.Record{})})
	if err != nil || len(seqs) != 1 || seqs[0] != 1 {
		t.Fatalf("host append: %v %v", seqs, err)
	}
	if err := putBeat(ctx, hc, "perm", heartbeat.Beat{Host: "h1", HWM: 1, Head: 1}); err != nil {
		t.Fatalf("host heartbeat: %v", err)
	}

	// The tooling user reads the log and the heartbeats.
	toolV := newViolations()
	tc := connect(toolV, nats.UserInfo("grafana", "tooling-pw"))
	tl, err := natsjs.OpenLog(ctx, tc, "perm", quick...)
	if err != nil {
		t.Fatalf("tooling open: %v", err)
	}
	var read []ledger.Record
	if err := tl.Read(ctx, 1, 1, func(r ledger.Record) error { read = append(read, r); return nil }); err != nil || len(read) != 1 {
		t.Fatalf("tooling read: %v %v", read, err)
	}
	head, err := tl.PartitionHead(ctx, "audit")
	if err != nil || head.Seq != 1 {
		t.Fatalf("tooling partition head: %+v %v", head, err)
	}
	hb, err := openBeats(ctx, tc, "perm")
	if err != nil {
		t.Fatalf("tooling opens the heartbeats: %v", err)
	}
	if beats, err := hb.List(ctx); err != nil || len(beats) != 1 || beats[0].HWM != 1 {
		t.Fatalf("tooling lists the heartbeats: %+v %v", beats, err)
	}

	// Each refused operation gets no answer and waits out its timeout, so they
	// run at once. The tooling commit has its connection to itself: Append tells
	// a refusal by the connection's last error, which another refusal on the same
	// connection could overwrite. The tooling user's other refusals come on a
	// second connection of the same user.
	toolV2 := newViolations()
	tc2 := connect(toolV2, nats.UserInfo("grafana", "tooling-pw"))
	hb2, err := openBeats(ctx, tc2, "perm")
	if err != nil {
		t.Fatalf("tooling opens the heartbeats: %v", err)
	}
	var refused sync.WaitGroup
	// Its commit is refused by the server: a permissions violation, nothing stored.
	var appendErr error
	refused.Go(func() {
		_, appendErr = tl.Append(ctx, []ledger.Event{event(t, tl.UUID(), "tool", "audit/two", head)})
	})
	// Nor may it write a heartbeat.
	refused.Go(func() {
		sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := hb2.Put(sctx, heartbeat.Beat{Host: "tool"}); err == nil {
			t.Error("tooling heartbeat put succeeded")
		}
	})
	// Neither it nor the host may delete or purge the stream.
	for _, nc := range []*nats.Conn{tc2, hc} {
		js, _ := jetstream.New(nc)
		refused.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if err := js.DeleteStream(dctx, "SYNCLEDGER_perm"); err == nil {
				t.Error("stream delete succeeded")
			}
		})
		refused.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if st, err := js.Stream(pctx, "SYNCLEDGER_perm"); err != nil {
				t.Errorf("stream info: %v", err)
			} else if err := st.Purge(pctx); err == nil {
				t.Error("stream purge succeeded")
			}
		})
	}
	refused.Wait()
	if !errors.Is(appendErr, ledger.ErrPermission) {
		t.Fatalf("tooling append: %v; want ledger.ErrPermission", appendErr)
	}
	v := toolV.wait(t, `Publish to "syncledger.perm.p.audit"`)
	t.Logf("tooling append: %v; server: %v", appendErr, v)
	if last, err := hl.LastSeq(ctx); err != nil || last != 1 {
		t.Fatalf("after the refused commit: last seq %d, %v; want 1", last, err)
	}
	toolV2.wait(t, `Publish to "$KV.SYNCLEDGER_HOSTS_perm.tool"`)
	for _, v := range []*violations{toolV2, hostV} {
		v.wait(t, `Publish to "$JS.API.STREAM.DELETE.SYNCLEDGER_perm"`)
		v.wait(t, `Publish to "$JS.API.STREAM.PURGE.SYNCLEDGER_perm"`)
	}
	if b, err := hl.Bounds(ctx); err != nil || b.First != 1 || b.Last != 1 {
		t.Fatalf("stream changed: %+v %v", b, err)
	}
}

func writeSeed(t *testing.T, seed string) string {
	t.Helper()
	path := t.TempDir() + "/user.nk"
	if err := os.WriteFile(path, []byte(seed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// putBeat records b in the ledger's heartbeat bucket on nc, as a host's sync
// does (one publish, or the bucket opened first).
func putBeat(ctx context.Context, nc *nats.Conn, ledgerName string, b heartbeat.Beat) error {
	kv, err := natsjs.HeartbeatKV(nc, ledgerName)
	if err != nil {
		return err
	}
	return heartbeat.NewStore(kv).Put(ctx, b)
}

// openBeats opens the ledger's heartbeat bucket on nc, as `hosts` does.
func openBeats(ctx context.Context, nc *nats.Conn, ledgerName string) (*heartbeat.Store, error) {
	kv, err := natsjs.HeartbeatKV(nc, ledgerName)
	if err != nil {
		return nil, err
	}
	if _, err := kv.Open(ctx); err != nil {
		return nil, err
	}
	return heartbeat.NewStore(kv), nil
}

// TestSetUsersRevokesOne: one credential per host; the server's users set
// again without host B disconnects B and refuses it from then on, while A and
// C, connected before, keep their connections and their rights, and connect
// again as before.
func TestSetUsersRevokesOne(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	scope := natsauth.Scope{Ledger: "revoke"}
	hostPerms := perms(t, natsauth.RoleHost, scope)
	users := []User{
		{Name: "host-a", Password: "a-pw", Permissions: hostPerms},
		{Name: "host-b", Password: "b-pw", Permissions: hostPerms},
		{Name: "host-c", Password: "c-pw", Permissions: hostPerms},
	}
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Users: users})
	admin, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: "revoke", UUID: "0190b0a1-0000-4000-8000-000000000009", Blobs: "file:///b"}); err != nil {
		t.Fatal(err)
	}
	conns := map[string]*nats.Conn{}
	closed := map[string]chan struct{}{}
	for _, u := range users {
		ch := make(chan struct{})
		closed[u.Name] = ch
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(u.Name, u.Password), nats.MaxReconnects(0),
			nats.ClosedHandler(func(*nats.Conn) { close(ch) }), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns[u.Name] = nc
	}
	commit := func(nc *nats.Conn, host string) error {
		l, err := natsjs.OpenLog(ctx, nc, "revoke", natsjs.WithTimeout(time.Second), natsjs.WithRetry(1, 0))
		if err != nil {
			return err
		}
		_, err = l.Append(ctx, []ledger.Event{event(t, l.UUID(), host, "data/t/"+host+"/m/1/raw", ledger.Record{})})
		return err
	}
	if err := s.SetUsers([]User{users[0], users[2]}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed["host-b"]:
	case <-time.After(10 * time.Second):
		t.Fatal("host B's connection is still open after its user was removed")
	}
	if _, err := nats.Connect(s.ClientURL(), nats.UserInfo("host-b", "b-pw"), nats.MaxReconnects(0)); err == nil {
		t.Error("host B connects after its user was removed")
	}
	for i, h := range []string{"host-a", "host-c"} {
		if conns[h].IsClosed() {
			t.Errorf("%s's connection closed by the reload", h)
		}
		if err := commit(conns[h], h); err != nil {
			t.Errorf("%s commits after B's removal: %v", h, err)
		}
		u := []User{users[0], users[2]}[i]
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(u.Name, u.Password))
		if err != nil {
			t.Errorf("%s connects again: %v", h, err)
			continue
		}
		nc.Close()
	}
	if err := (&Server{}).SetUsers(users); err == nil {
		t.Error("SetUsers on a server started without users succeeded")
	}
}

// fenceRecord is a fence record of lock taken by host, in ledger uuid.
func fenceRecord(t *testing.T, uuid, lock, host string) ledger.FenceRecord {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.FenceRecord{V: ledger.FormatVersion, Ledger: uuid, Lock: lock, ID: id, Host: host, At: time.Now()}
}
