package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/statedb"
)

// publishRaw puts a message on a partition subject as a broken or hostile client
// could, bypassing the codec.
func (e *env) publishRaw(partition, body string) {
	e.t.Helper()
	if e.mem != nil {
		e.mem.Publish(ledger.Subject("test", partition), []byte(body))
		return
	}
	js, err := e.nc.JetStream()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := js.Publish(ledger.Subject("test", partition), []byte(body)); err != nil {
		e.t.Fatal(err)
	}
}

func hwmOf(t *testing.T, h *Host) ledger.Seq {
	t.Helper()
	var hwm ledger.Seq
	err := h.View(func(db *statedb.DB) (err error) {
		_, hwm, err = db.HWM()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hwm
}

func TestBadInputLeavesHWM(t *testing.T) {
	t.Parallel()
	info := func(e *env) ledger.Info {
		i, err := e.log.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	goodEvent := func(e *env, path string) string {
		return `{"v":1,"ledger":"` + info(e).UUID + `","commit":"019a1b2c-3d4e-7f60-8a1b-2c3d4e5f6a7b","host":"evil",` +
			`"at":"2026-11-29T10:00:00Z","partition":"audit","modelSeq":2,"prev":1,"parts":1,"part":1,` +
			`"entries":[{"path":"` + path + `","sha256":"` + ledger.DigestOf([]byte("pwned")).String() + `","size":5,"mode":420}]}`
	}
	tests := []struct {
		name    string
		inject  func(e *env, a *Host)
		wantErr error
		wantMsg string
	}{
		{"traversal path", func(e *env, a *Host) {
			e.publishRaw("audit", goodEvent(e, "audit/../../../escaped"))
		}, ledger.ErrInvalid, `"..`},
		{"absolute path", func(e *env, a *Host) {
			e.publishRaw("audit", goodEvent(e, "/tmp/escaped"))
		}, ledger.ErrInvalid, "absolute"},
		{"unknown version", func(e *env, a *Host) {
			e.publishRaw("audit", strings.Replace(goodEvent(e, "audit/y"), `"v":1`, `"v":2`, 1))
		}, ledger.ErrUnknownVersion, "version 2"},
		{"not json", func(e *env, a *Host) {
			e.publishRaw("audit", "{oops")
		}, ledger.ErrInvalid, "seq 2"},
		{"blob does not match its sha256", func(e *env, a *Host) {
			writeFile(t, a, "audit/y", "the real content")
			mustCommit(t, a, "")
			e.corruptBlob(ledger.DigestOf([]byte("the real content")))
		}, ledger.ErrChecksum, "audit/y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			a, b := e.host("a"), e.host("b")
			writeFile(t, a, "audit/x", "1")
			mustCommit(t, a, "")
			mustSync(t, b, SyncOptions{})
			before := hwmOf(t, b)
			tt.inject(e, a)
			_, err := b.Sync(context.Background(), SyncOptions{})
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("sync = %v; want %v mentioning %q", err, tt.wantErr, tt.wantMsg)
			}
			if got := hwmOf(t, b); got != before {
				t.Fatalf("hwm moved from %d to %d on bad input", before, got)
			}
			for _, p := range []string{"audit/y", "../escaped", "../../escaped"} {
				if _, err := os.Stat(filepath.Join(b.Dir().Root(), p)); err == nil {
					t.Fatalf("%s written", p)
				}
			}
			if _, err := os.Stat("/tmp/escaped"); err == nil {
				t.Fatal("/tmp/escaped written")
			}
			if got, _ := readFile(t, b, "audit/x"); got != "1" {
				t.Fatalf("existing file changed: %q", got)
			}
		})
	}
}
