package embedded

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/embedded/embeddedtest"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// Only the admin may quarantine a message (ledger.Quarantine): the host role,
// which publishes commits on syncledger.<ledger>.p.>, is refused the notices'
// subject .p.~q by the server; the admin's notice is stored.
func TestOnlyAdminQuarantines(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	scope := natsauth.Scope{Ledger: "quar"}
	hostKey := embeddedtest.NewNkey(t)
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), User: "admin", Password: "admin-pw",
		Users: []User{{Nkey: hostKey.Public, Permissions: perms(t, natsauth.RoleHost, scope)}}})
	connect := func(v *violations, opts ...nats.Option) *nats.Conn { return connectT(t, s, v, opts...) }
	admin := connect(nil, nats.UserInfo("admin", "admin-pw"))
	al, err := natsjs.CreateLog(ctx, admin, natsjs.LedgerConfig{Name: "quar", UUID: "0190b0a1-0000-4000-8000-000000000002", Blobs: "file:///b"})
	if err != nil {
		t.Fatal(err)
	}
	hostNkey, err := nats.NkeyOptionFromSeed(writeSeed(t, hostKey.Seed))
	if err != nil {
		t.Fatal(err)
	}
	hostV := newViolations()
	hl, err := natsjs.OpenLog(ctx, connect(hostV, hostNkey), "quar", natsjs.WithTimeout(500*time.Millisecond), natsjs.WithRetry(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hl.Append(ctx, []ledger.Event{event(t, hl.UUID(), "h1", "audit/one", ledger.Record{})}); err != nil {
		t.Fatalf("host append: %v", err)
	}
	q := ledger.Quarantine{Seq: 1, Reason: "test", By: "h1", At: time.Now()}
	if _, err := hl.Quarantine(ctx, q, true); !errors.Is(err, ledger.ErrPermission) {
		t.Fatalf("host quarantine = %v, want ErrPermission", err)
	}
	hostV.wait(t, ledger.QuarantineSubject("quar"))
	if _, err := al.Quarantine(ctx, q, true); err != nil {
		t.Fatalf("admin quarantine: %v", err)
	}
	qs, err := hl.Quarantines(ctx)
	if err != nil || len(qs) != 1 || qs[1].Reason != "test" {
		t.Fatalf("quarantines as the host reads them: %v %v", qs, err)
	}
}
