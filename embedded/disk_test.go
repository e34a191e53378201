package embedded

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// fakeDisk is a filesystem whose free space the test sets.
type fakeDisk struct{ free atomic.Uint64 }

const fakeSize = 1 << 30

func (d *fakeDisk) stat(string) (free, size uint64, noInodes bool, err error) {
	return d.free.Load(), fakeSize, false, nil
}

// codeOf is the JetStream API error code of err, 0 if none.
func codeOf(err error) jetstream.ErrorCode {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode
	}
	return 0
}

// serverStates subscribes to ledger's server subject.
func serverStates(t *testing.T, nc *nats.Conn, ledgerName string) <-chan ledger.ServerState {
	t.Helper()
	ch := make(chan ledger.ServerState, 64)
	sub, err := nc.Subscribe(natsjs.ServerSubject(ledgerName), func(m *nats.Msg) {
		var st ledger.ServerState
		if err := json.Unmarshal(m.Data, &st); err != nil {
			t.Errorf("server state %q: %v", m.Data, err)
			return
		}
		select {
		case ch <- st:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return ch
}

func nextState(t *testing.T, ch <-chan ledger.ServerState, full bool) ledger.ServerState {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case st := <-ch:
			if st.Full == full {
				return st
			}
		case <-timeout:
			t.Fatalf("no server state with full=%v within 5 s", full)
		}
	}
}

// TestDiskWatch: below the reserve every write is refused at once (err_code
// 10002), the ledgers' clients are told the directory and the free space, and
// reads go on; once free space reaches the resume level writes are taken
// again, without a restart and with everything acknowledged kept.
func TestDiskWatch(t *testing.T) {
	t.Parallel()
	disk := &fakeDisk{}
	disk.free.Store(fakeSize / 2)
	const reserve = 64 << 20
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Reserve: reserve, DiskInterval: 10 * time.Millisecond, statDisk: disk.stat})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: ledger.StreamName("full"), Subjects: []string{ledger.SubjectPrefix("full") + ">"}}); err != nil {
		t.Fatal(err)
	}
	subj := ledger.Subject("full", "p")
	states := serverStates(t, nc, "full")
	acked := 0
	publish := func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.Publish(pctx, subj, []byte(fmt.Sprintf("msg %d", acked+1)))
		if err == nil {
			acked++
		}
		return err
	}
	for range 3 {
		if err := publish(); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Disk(); st.Full || st.Reserve != reserve || st.Resume != reserve*3/2 || st.Dir != s.DataDir() {
		t.Fatalf("Disk() = %+v before the disk fills", st)
	}

	disk.free.Store(reserve - 1)
	st := nextState(t, states, true)
	if st.Dir != s.DataDir() || st.Free != reserve-1 || st.Reserve != reserve || st.Resume != reserve*3/2 || st.Need() != reserve/2+1 || st.Stored == 0 {
		t.Errorf("the full server says %+v", st)
	}
	start := time.Now()
	err = publish()
	if took := time.Since(start); codeOf(err) != 10002 || took > time.Second {
		t.Fatalf("publish on a full disk: %v after %v, want err_code 10002 at once", err, took)
	}
	if _, err := js.Stream(ctx, ledger.StreamName("full")); err != nil {
		t.Fatalf("a read on a full disk: %v", err)
	}
	// Between the reserve and the resume level, still full: no flapping.
	disk.free.Store(reserve + reserve/4)
	time.Sleep(50 * time.Millisecond)
	if err := publish(); codeOf(err) != 10002 {
		t.Fatalf("publish below the resume level: %v, want err_code 10002", err)
	}
	st = nextState(t, states, true)
	if st.Free != reserve+reserve/4 {
		t.Errorf("the full server says %d free, want %d", st.Free, reserve+reserve/4)
	}

	disk.free.Store(reserve * 3 / 2)
	if st := nextState(t, states, false); st.Full || st.Since.IsZero() {
		t.Errorf("the server that takes writes again says %+v", st)
	}
	if err := publish(); err != nil {
		t.Fatalf("publish once space is back: %v", err)
	}
	info, err := js.Stream(ctx, ledger.StreamName("full"))
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != uint64(acked) {
		t.Fatalf("the stream holds %d messages, %d were acknowledged", got, acked)
	}
	if st := s.Disk(); st.Full {
		t.Fatalf("Disk() = %+v once space is back", st)
	}
}

// TestDiskWatchOff: a negative reserve leaves nats-server's own behaviour.
func TestDiskWatchOff(t *testing.T) {
	t.Parallel()
	disk := &fakeDisk{} // nothing free: the watch would close the store
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Reserve: -1, DiskInterval: 10 * time.Millisecond, statDisk: disk.stat})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := js.Publish(t.Context(), "t.x", []byte("x")); err != nil {
		t.Fatalf("publish with the watch off: %v", err)
	}
	if st := s.Disk(); st != (ledger.ServerState{}) {
		t.Fatalf("Disk() = %+v with the watch off", st)
	}
}

// TestDiskFullClients: the ledger's clients on a full server — an append and a
// blob put fail at once with ledger.ErrServerFull, the append's error with
// what serve says of its disk; ServerState says so in one request (and the
// wait for serve's word), and says the server takes writes once it does.
func TestDiskFullClients(t *testing.T) {
	t.Parallel()
	disk := &fakeDisk{}
	disk.free.Store(fakeSize / 2)
	const reserve = 64 << 20
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Reserve: reserve, DiskInterval: 10 * time.Millisecond, statDisk: disk.stat})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := t.Context()
	l, err := natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: "full", Blobs: "nats://fullblobs"})
	if err != nil {
		t.Fatal(err)
	}
	blobsDrv, err := natsblob.New(ctx, natsblob.Config{Conn: nc, Bucket: "fullblobs"})
	if err != nil {
		t.Fatal(err)
	}
	blobs := ledger.NewBucket(blobsDrv, ledger.RetryPolicy{})
	ev := func(i int) []ledger.Event {
		id, _ := ledger.NewCommitID(rand.Reader)
		return []ledger.Event{{V: ledger.FormatVersion, Ledger: l.UUID(), Commit: id, Host: "h", At: time.Now(), Partition: "audit",
			ModelSeq: uint64(i), Prev: ledger.Seq(i - 1), Parts: 1, Part: 1,
			Entries: []ledger.Entry{{Path: fmt.Sprintf("audit/%d", i), SHA256: ledger.DigestOf([]byte("x")), Size: 1, Mode: 0o644}}}}
	}
	if _, err := l.Append(ctx, ev(1)); err != nil {
		t.Fatal(err)
	}
	if st, err := l.ServerState(ctx); err != nil || st.Full {
		t.Fatalf("ServerState before the disk fills: %+v, %v", st, err)
	}

	disk.free.Store(reserve - 1)
	for !s.Disk().Full {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	_, err = l.Append(ctx, ev(2))
	var full *ledger.ServerFullError
	if !errors.As(err, &full) || time.Since(start) > 3*time.Second {
		t.Fatalf("append on a full server: %v after %v, want a ServerFullError within seconds", err, time.Since(start))
	}
	t.Logf("append on a full server: %v (after %v)", err, time.Since(start))
	if st := full.State; !st.Full || st.Dir != s.DataDir() || st.Free != reserve-1 || st.Need() != reserve/2+1 {
		t.Errorf("the append's error says %+v", st)
	}
	if !strings.Contains(err.Error(), s.DataDir()+" has 64.0 MiB free") {
		t.Errorf("the append's error does not name the directory and its free space: %v", err)
	}
	start = time.Now()
	err = blobs.PutObject(ctx, "blobs/x", strings.NewReader("content"), 7)
	if !errors.Is(err, ledger.ErrServerFull) || time.Since(start) > time.Second {
		t.Fatalf("blob put on a full server: %v after %v, want ErrServerFull at once", err, time.Since(start))
	}
	st, err := l.ServerState(ctx)
	if err != nil || !st.Full || st.Dir != s.DataDir() {
		t.Fatalf("ServerState of a full server: %+v, %v", st, err)
	}

	disk.free.Store(reserve * 2)
	for s.Disk().Full {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := l.Append(ctx, ev(2)); err != nil {
		t.Fatalf("append once space is back: %v", err)
	}
	if err := blobs.PutObject(ctx, "blobs/x", strings.NewReader("content"), 7); err != nil {
		t.Fatalf("blob put once space is back: %v", err)
	}
	if st, err := l.ServerState(ctx); err != nil || st.Full {
		t.Fatalf("ServerState once space is back: %+v, %v", st, err)
	}
}

// TestDiskStateRoles: every role learns that the server is full, and what
// serve says of its disk, with the rights it has (the account's JetStream
// info, the ledger's server subject); no host or tooling credential can speak
// for serve on that subject.
func TestDiskStateRoles(t *testing.T) {
	t.Parallel()
	disk := &fakeDisk{}
	disk.free.Store(fakeSize / 2)
	const name, reserve = "roles", 64 << 20
	scope := natsauth.Scope{Ledger: name}
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), User: "admin", Password: "admin-pw",
		Users: []User{
			{Name: "host", Password: "host-pw", Permissions: perms(t, natsauth.RoleHost, scope)},
			{Name: "tool", Password: "tool-pw", Permissions: perms(t, natsauth.RoleTooling, scope)},
		}, Reserve: reserve, DiskInterval: 10 * time.Millisecond, statDisk: disk.stat})
	admin := connectT(t, s, nil, nats.UserInfo("admin", "admin-pw"))
	if _, err := natsjs.CreateLog(t.Context(), admin, natsjs.LedgerConfig{Name: name, Blobs: "file:///b"}); err != nil {
		t.Fatal(err)
	}
	disk.free.Store(reserve / 2)
	for !s.Disk().Full {
		time.Sleep(5 * time.Millisecond)
	}
	for _, role := range []string{"host", "tool"} {
		v := newViolations()
		nc := connectT(t, s, v, nats.UserInfo(role, role+"-pw"))
		st, err := natsjs.ServerState(t.Context(), nc, name, 5*time.Second)
		if err != nil || !st.Full || st.Dir != s.DataDir() || st.Free != reserve/2 {
			t.Errorf("%s: ServerState = %+v, %v", role, st, err)
		}
		if err := nc.Publish(natsjs.ServerSubject(name), []byte(`{"full":false}`)); err != nil {
			t.Fatal(err)
		}
		v.wait(t, natsjs.ServerSubject(name)) // the server refuses it

	}
}

// TestSetUsersKeepsDiskFull: revoking a user (SetUsers reloads the server's
// options, which gives the account back its JetStream limits) while the disk
// is full leaves every write refused; once there is room again, writes are
// taken.
func TestSetUsersKeepsDiskFull(t *testing.T) {
	t.Parallel()
	disk := &fakeDisk{}
	disk.free.Store(fakeSize / 2)
	const reserve = 64 << 20
	p := perms(t, natsauth.RoleHost, natsauth.Scope{Ledger: "full"})
	users := []User{{Name: "a", Password: "a-pw", Permissions: p}, {Name: "b", Password: "b-pw", Permissions: p}}
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Reserve: reserve, DiskInterval: 10 * time.Millisecond, statDisk: disk.stat, Users: users})
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: ledger.StreamName("full"), Subjects: []string{ledger.SubjectPrefix("full") + ">"}}); err != nil {
		t.Fatal(err)
	}
	states := serverStates(t, nc, "full")
	publish := func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.Publish(pctx, ledger.Subject("full", "p"), []byte("x"))
		return err
	}
	for range 3 {
		if err := publish(); err != nil {
			t.Fatal(err)
		}
	}
	disk.free.Store(reserve - 1)
	nextState(t, states, true)
	if err := publish(); codeOf(err) != 10002 {
		t.Fatalf("a write on the full disk: %v, want err_code 10002", err)
	}
	if err := s.SetUsers(users[:1]); err != nil {
		t.Fatal(err)
	}
	if err := publish(); codeOf(err) != 10002 {
		t.Fatalf("a write on the full disk after a user was revoked: %v, want err_code 10002", err)
	}
	disk.free.Store(reserve * 2)
	nextState(t, states, false)
	if err := publish(); err != nil {
		t.Fatalf("a write once there is room: %v", err)
	}
}
