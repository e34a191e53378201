package host

import (
	"context"
	"errors"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

// lostAnswerLog stores an append and then answers with an error, once armed:
// an append whose outcome the client never learned (a cut connection, a
// timeout after the server stored it).
type lostAnswerLog struct {
	ledger.CommitLog
	armed bool
}

func (l *lostAnswerLog) Append(ctx context.Context, evs []ledger.Event, fences ...ledger.Fence) ([]ledger.Seq, error) {
	seqs, err := l.CommitLog.Append(ctx, evs, fences...)
	if err == nil && l.armed {
		l.armed = false
		return nil, errors.New("answer lost")
	}
	return seqs, err
}

// TestAppendOutcomeNeverLearned is #14 point 3 in process: host v's commit of
// shared=v1 is stored but v never learns it; w syncs it and commits w2 on top.
// v's file holds what the log has at v's commit: not a local change. v's next
// sync (or commit) takes w2 and every host converges.
func TestAppendOutcomeNeverLearned(t *testing.T) {
	t.Parallel()
	for _, next := range []string{"sync", "commit"} {
		t.Run(next, func(t *testing.T) {
			e := newEnv(t)
			lost := &lostAnswerLog{CommitLog: e.log}
			v, err := Open(Config{Cache: t.TempDir(), Host: "v", Log: lost, Blobs: e.blobs})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { v.Close() })
			w := e.host("w")
			writeFile(t, v, "p/shared", "v0")
			writeFile(t, v, "p/other", "o")
			mustCommit(t, v, "base")
			mustSync(t, w, SyncOptions{})

			writeFile(t, v, "p/shared", "v1")
			lost.armed = true
			if _, err := v.Commit(context.Background(), CommitOptions{Message: "lost"}); err == nil {
				t.Fatal("commit with a lost answer succeeded")
			}
			mustSync(t, w, SyncOptions{})
			if got, _ := readFile(t, w, "p/shared"); got != "v1" {
				t.Fatalf("w holds %q, want v's stored v1", got)
			}
			writeFile(t, w, "p/shared", "w2")
			mustCommit(t, w, "w2")

			if next == "sync" {
				mustSync(t, v, SyncOptions{})
			} else if res := mustCommit(t, v, "again"); !res.Nothing {
				t.Fatalf("commit after catching up published %v", res.Paths)
			}
			mustSync(t, v, SyncOptions{})
			fresh := e.host("fresh")
			mustSync(t, fresh, SyncOptions{})
			for _, h := range []*Host{v, w, fresh} {
				if got, _ := readFile(t, h, "p/shared"); got != "w2" {
					t.Fatalf("%s holds %q, want w2", h.cfg.Host, got)
				}
				st := mustStatus(t, h)
				if st.HWM != st.Head || len(st.Dirty) > 0 || len(st.Conflicts) > 0 {
					t.Fatalf("%s: hwm %d head %d dirty %v conflicts %v", h.cfg.Host, st.HWM, st.Head, st.Dirty, st.Conflicts)
				}
			}
		})
	}
}
