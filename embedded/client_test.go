package embedded

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/embedded/embeddedtest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// TestClient: natsjs.Open builds its connection from each form of
// credentials, and the server's refusals reach the caller as typed errors —
// the operation that watches the refused subject (a key-value bucket's) fails
// at once, and a refusal nobody claimed goes to Config.Refused.
func TestClient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const name = "client"
	scope := natsauth.Scope{Ledger: name}
	hostKey := embeddedtest.NewNkey(t)
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), User: "admin", Password: "admin-pw",
		Users: []User{
			{Nkey: hostKey.Public, Permissions: perms(t, natsauth.RoleHost, scope)},
			{Name: "tool", Password: "tool-pw", Permissions: perms(t, natsauth.RoleTooling, scope)},
		}})
	open := func(e natsjs.Endpoint, refused func(*ledger.PermissionError)) *natsjs.Client {
		t.Helper()
		c, err := natsjs.Open(ctx, natsjs.Config{Write: e, Name: "client test", Timeout: 5 * time.Second, Refused: refused})
		if err != nil {
			t.Fatalf("Open(%s): %v", e.URL, err)
		}
		t.Cleanup(c.Close)
		return c
	}

	admin := open(natsjs.Endpoint{URL: s.ClientURL(), User: "admin", Password: "admin-pw"}, nil)
	l, err := admin.Ledger(name).Create(ctx, natsjs.LedgerConfig{Blobs: "file:///tmp/blobs"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Name() != name {
		t.Fatalf("Create made ledger %q, want %q", l.Name(), name)
	}

	// The embedded server's own endpoint: in process, as serve's commands.
	if _, err := open(s.Endpoint(), nil).Ledger(name).Log(ctx); err != nil {
		t.Fatalf("Log through the in-process endpoint: %v", err)
	}

	// The host role, by nkey seed inline and from a file: it beats and reads.
	for _, seed := range []string{hostKey.Seed, writeSeed(t, hostKey.Seed)} {
		host := open(natsjs.Endpoint{URL: s.ClientURL(), Nkey: seed}, nil).Ledger(name)
		if _, err := host.Log(ctx); err != nil {
			t.Fatalf("host Log: %v", err)
		}
		kv, err := host.Heartbeats()
		if err != nil {
			t.Fatal(err)
		}
		if err := heartbeat.NewStore(kv).Put(ctx, heartbeat.Beat{Host: "h1", HWM: 0}); err != nil {
			t.Fatalf("host beat: %v", err)
		}
	}

	// The tooling role may not use the swamp bucket: the open fails at once,
	// with the refused subject, and no unclaimed refusal is reported.
	var (
		mu        sync.Mutex
		unclaimed []*ledger.PermissionError
	)
	tool := open(natsjs.Endpoint{URL: s.ClientURL(), User: "tool", Password: "tool-pw"}, func(pe *ledger.PermissionError) {
		mu.Lock()
		unclaimed = append(unclaimed, pe)
		mu.Unlock()
	}).Ledger(name)
	start := time.Now()
	_, err = tool.SwampKV(ctx)
	var pe *ledger.PermissionError
	if !errors.As(err, &pe) || !errors.Is(err, ledger.ErrPermission) || !strings.Contains(pe.Subject, natsjs.SwampBucket(name)) || pe.Verb != "publish" {
		t.Fatalf("tooling SwampKV = %v, want a *ledger.PermissionError naming the bucket", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("tooling SwampKV failed after %v: want at once, not at the request's timeout", d)
	}
	mu.Lock()
	if len(unclaimed) != 0 {
		t.Errorf("the swamp bucket's refusal also went to Refused: %v", unclaimed)
	}
	mu.Unlock()

	// Its commit is refused too; nothing watches the publish, so Refused
	// hears of it, and Append says permission denied.
	tl, err := tool.Log(ctx, natsjs.WithTimeout(time.Second), natsjs.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Append(ctx, []ledger.Event{event(t, l.UUID(), "t", "audit/x", ledger.Record{})}); !errors.As(err, &pe) || !strings.HasPrefix(pe.Subject, ledger.SubjectPrefix(name)) {
		t.Fatalf("tooling Append = %v, want a *ledger.PermissionError on the ledger's subjects", err)
	}
	mu.Lock()
	if len(unclaimed) == 0 || !strings.HasPrefix(unclaimed[0].Subject, ledger.SubjectPrefix(name)) {
		t.Errorf("Refused heard %v, want the refused commit", unclaimed)
	}
	mu.Unlock()

	// A wrong password is a connect error saying so.
	_, err = natsjs.Open(ctx, natsjs.Config{Write: natsjs.Endpoint{URL: s.ClientURL(), User: "tool", Password: "nope"}})
	var ce *natsjs.ConnectError
	if !errors.As(err, &ce) || ce.Cause != natsjs.ConnectAuth || !errors.Is(err, ledger.ErrUnreachable) {
		t.Fatalf("Open with a wrong password = %v, want a ConnectError of cause ConnectAuth", err)
	}
}
