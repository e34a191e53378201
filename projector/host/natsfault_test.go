package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// natsEnv is a ledger reached through url (a server, or a proxy in front of
// one) by a reconnecting client, with a file blob store.
func natsEnv(t *testing.T, url string) *env {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The log is created with the default timeout (creating its streams and
	// buckets on a loaded machine can take longer than 400 ms: the tests
	// failed there), then opened for the test with a short one.
	if _, err := natsjs.CreateLog(context.Background(), nc, natsjs.LedgerConfig{Name: "test", Blobs: "file:///unused"}); err != nil {
		t.Fatal(err)
	}
	lg, err := natsjs.OpenLog(context.Background(), nc, "test",
		// A lost ack costs one request timeout: 400 ms, not the default, keeps
		// the tests that lose them short; retries cover a slow answer.
		natsjs.WithTimeout(400*time.Millisecond), natsjs.WithRetry(10, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, nc: nc, log: lg, objs: objs, blobs: ledger.NewBucket(objs, ledger.RetryPolicy{Attempts: 1})}
}

// commitUntil commits h's changes, again after each failure (a failed commit
// leaves the files dirty), until it succeeds or d passes. It returns the
// failures seen, and an error if it never succeeded.
func commitUntil(h *Host, msg string, d time.Duration) ([]error, error) {
	var errs []error
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := h.Commit(ctx, CommitOptions{Message: msg})
		cancel()
		if err == nil {
			return errs, nil
		}
		errs = append(errs, err)
		if time.Now().After(deadline) {
			return errs, fmt.Errorf("commit %q still failing after %v: %w", msg, d, errors.Join(errs...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func syncUntil(h *Host, d time.Duration) ([]error, error) {
	var errs []error
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := h.Sync(ctx, SyncOptions{})
		cancel()
		if err == nil {
			return errs, nil
		}
		errs = append(errs, err)
		if time.Now().After(deadline) {
			return errs, fmt.Errorf("sync still failing after %v: %w", d, errors.Join(errs...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOnce verifies that every commit in the log appears once (all its parts,
// at consecutive seqs) and that each path of want was committed exactly once
// per distinct content, i.e. no commit was published twice.
func (e *env) checkOnce(ctx context.Context) map[string]int {
	e.t.Helper()
	commits := map[string][]ledger.Seq{}
	chains := map[string]ledger.Record{}
	if err := e.log.Read(ctx, 1, 0, func(r ledger.Record) error {
		commits[r.Event.Commit] = append(commits[r.Event.Commit], r.Seq)
		prev, ok := chains[r.Event.Partition]
		if ok && (r.Event.Prev != prev.Seq || r.Event.ModelSeq != prev.Event.ModelSeq+1) || !ok && r.Event.ModelSeq != 1 {
			return fmt.Errorf("chain of %s broken at seq %d", r.Event.Partition, r.Seq)
		}
		chains[r.Event.Partition] = r
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	byHost := map[string]int{}
	for id, seqs := range commits {
		for i := range seqs {
			if seqs[i] != seqs[0]+ledger.Seq(i) {
				e.t.Fatalf("commit %s at seqs %v: not one atomic batch", id, seqs)
			}
		}
		byHost[id] = len(seqs)
	}
	return byHost
}

// TestLostPublishAcks commits through a proxy that cuts the connection right
// after forwarding an event's publish: the server stores it, the client never
// sees the ack. Append resolves the outcome by reading the partition through
// the stream leader once reconnected: the commit succeeds, stored once, the
// host records it, and another host converges. Single- and multi-partition
// (atomic batch) commits alike.
func TestLostPublishAcks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := natsjstest.RunServer(t)
	p, err := faulty.NewProxy(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	e := natsEnv(t, p.URL())
	a := e.host("a")
	b := e.host("b")
	for i := range 6 {
		writeFile(t, a, fmt.Sprintf("audit/round-%d", i), fmt.Sprint(i))
		if i%2 == 1 { // a multi-partition commit: one atomic batch
			writeFile(t, a, fmt.Sprintf("data/t/m%d/d/1/raw", i), fmt.Sprint(i))
			writeFile(t, a, fmt.Sprintf("outputs/t/m%d/out/1/raw", i), fmt.Sprint(i))
		}
		p.CutAfter([]byte("PUB "+ledger.SubjectPrefix("test")), 1)
		res := mustCommit(t, a, fmt.Sprint("round ", i))
		if len(res.Seqs) == 0 {
			t.Fatalf("round %d: commit without seqs", i)
		}
		if st := mustStatus(t, a); len(st.Dirty) != 0 || st.HWM != st.Head {
			t.Fatalf("round %d: after the commit a is dirty %v, HWM %d head %d", i, st.Dirty, st.HWM, st.Head)
		}
	}
	cuts, _ := p.Stats()
	if cuts < 6 {
		t.Fatalf("%d publishes cut, want 6", cuts)
	}
	commits := e.checkOnce(ctx)
	if len(commits) != 6 {
		t.Fatalf("%d commits in the log, want 6 (each once): %v", len(commits), commits)
	}
	mustSync(t, b, SyncOptions{})
	if diff := cmp.Diff(cacheFiles(t, a), cacheFiles(t, b)); diff != "" {
		t.Fatalf("caches differ (-a +b):\n%s", diff)
	}
	t.Logf("%d publishes lost their ack; %d commits stored once each", cuts, len(commits))
}

// TestServerRestart restarts the server (same port, same store) while a host
// watches, another syncs and a third commits. The committer's commits succeed
// once the server is back (a commit that failed is committed again: the files
// are still dirty) and are stored once each; the syncing host completes its
// sync; the watching host resumes and applies every commit; all converge.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := natsjstest.RunServer(t) // restarted on its port, with its store
	e := natsEnv(t, srv.ClientURL())
	writer := e.host("writer")
	watcher := e.host("watcher")
	syncer := e.host("syncer")

	wctx, stopWatch := context.WithCancel(ctx)
	var (
		mu       sync.Mutex
		watched  ledger.Seq
		watchErr = make(chan error, 1)
	)
	go func() {
		watchErr <- watcher.Watch(wctx, SyncOptions{}, func(r SyncResult) {
			mu.Lock()
			watched = max(watched, r.Head)
			mu.Unlock()
		})
	}()
	waitWatched := func(seq ledger.Seq) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			w := watched
			mu.Unlock()
			if w >= seq {
				return
			}
			select {
			case err := <-watchErr:
				t.Fatalf("watch ended at seq %d (want %d): %v", w, seq, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("watch at seq %d, want %d", w, seq)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	round := 0
	commit := func() {
		t.Helper()
		round++
		writeFile(t, writer, "audit/log", fmt.Sprint("round ", round))
		writeFile(t, writer, fmt.Sprintf("data/t/m%d/d/1/raw", round%3), fmt.Sprint(round))
		if _, err := commitUntil(writer, fmt.Sprint("round ", round), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		commit()
	}
	head, _ := e.log.LastSeq(ctx)
	waitWatched(head)

	// Restart the server while the writer commits and the syncer syncs.
	var wg sync.WaitGroup
	var commitErrs, syncErrs []error
	var commitErr, syncErr error
	writeFile(t, writer, "audit/during", "restart")
	srv.Shutdown()
	wg.Go(func() { commitErrs, commitErr = commitUntil(writer, "during the restart", 30*time.Second) })
	wg.Go(func() { syncErrs, syncErr = syncUntil(syncer, 30*time.Second) })
	time.Sleep(1500 * time.Millisecond) // both start while the server is down
	srv.Restart()
	wg.Wait()
	if err := errors.Join(commitErr, syncErr); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		commit()
	}
	head, _ = e.log.LastSeq(ctx)
	waitWatched(head)
	if _, err := syncUntil(syncer, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	stopWatch()
	if err := <-watchErr; err != nil {
		t.Fatalf("watch: %v", err)
	}

	commits := e.checkOnce(ctx)
	if len(commits) != 7 {
		t.Fatalf("%d commits in the log, want 7, each once: %v", len(commits), commits)
	}
	want := cacheFiles(t, writer)
	for _, h := range []*Host{watcher, syncer} {
		if diff := cmp.Diff(want, cacheFiles(t, h)); diff != "" {
			t.Errorf("%s differs from the writer (-writer +%s):\n%s", h.cfg.Host, h.cfg.Host, diff)
		}
	}
	t.Logf("during the restart: %d failed commit attempts, %d failed sync attempts", len(commitErrs), len(syncErrs))
}
