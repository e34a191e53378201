package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
)

// faultyHost opens a host whose blob store injects faults (faulty.Store over
// the env's driver, its batches' puts and stats included: the host's commits
// take production's batched path) under retry's policy (none if nil), as
// cmd/syncledger wires it (blobs.Open).
func (e *env) faultyHost(name string, cfg faulty.Config, retry *ledger.RetryPolicy) (*Host, *faulty.Store) {
	e.t.Helper()
	fs := faulty.New(e.objs, cfg)
	p := ledger.RetryPolicy{Attempts: 1}
	if retry != nil {
		p = *retry
	}
	h, err := Open(Config{Cache: e.t.TempDir(), Host: name, Log: e.log, Blobs: ledger.NewBucket(fs, p)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Close() })
	return h, fs
}

// checkNoDangling verifies I6 on the whole log: every blob an event
// references (its manifest too) is stored, and verifies.
func (e *env) checkNoDangling(ctx context.Context) int {
	e.t.Helper()
	n := 0
	err := e.log.Read(ctx, 1, 0, func(r ledger.Record) error {
		ds := []ledger.Digest{}
		if !r.Event.Manifest.IsZero() {
			ds = append(ds, r.Event.Manifest)
		}
		for _, en := range r.Event.Entries {
			if !en.Deleted {
				ds = append(ds, en.SHA256)
			}
		}
		for _, d := range ds {
			if _, err := ledger.ReadBlob(ctx, e.blobs, d); err != nil {
				return fmt.Errorf("I6: seq %d references blob %s: %w", r.Seq, d, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// checkContent verifies I5 on a cache: every file matches its index row or,
// when a sync failed part way (a download of the same Ready failed, and the
// Ready was discarded), the content some event wrote at its path — never
// bytes no event wrote.
func (e *env) checkContent(ctx context.Context, h *Host) {
	e.t.Helper()
	v, err := h.Verify(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(v.Altered) == 0 {
		return
	}
	written := map[string]map[ledger.Digest]bool{}
	if err := e.log.Read(ctx, 1, 0, func(r ledger.Record) error {
		for _, en := range r.Event.Entries {
			if written[en.Path] == nil {
				written[en.Path] = map[ledger.Digest]bool{}
			}
			written[en.Path][en.SHA256] = true
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	for _, p := range v.Altered {
		got, ok := readFile(e.t, h, p)
		if !ok || !written[p][ledger.DigestOf([]byte(got))] {
			e.t.Fatalf("I5: cache file %s holds content no event wrote", p)
		}
	}
}

// TestBlobFaults commits and syncs through blob stores that fail a third of
// their calls (5xx, timeouts, resets, truncated bodies, slow answers, lost
// acks). Without retries a commit either succeeds or fails with an error naming
// the upload, having published nothing; with retries (the bucket's retry
// policy) every commit succeeds. No event ever references a blob that is not stored
// (I6); a sync either completes or fails, and never leaves a file whose
// content no event wrote (I5); once the faults stop, every host converges.
func TestBlobFaults(t *testing.T) {
	t.Parallel()
	policy := &ledger.RetryPolicy{Attempts: 6, Wait: time.Millisecond, MaxWait: 10 * time.Millisecond, AttemptTimeout: 2 * time.Second}
	for _, tc := range []struct {
		name  string
		retry *ledger.RetryPolicy
		// reader's faults: with retries, all but Truncate (a clean short body
		// fails verification above the object store, where no retry is).
		readerFaults []faulty.Fault
	}{
		// Without retries syncs fail part way and leave files their state does
		// not claim yet (journalled); later syncs take them over even after the
		// ledger moved on for them (TestSyncAfterInterruptedApply).
		{"no retries", nil, nil},
		{"retrying store", policy, []faulty.Fault{faulty.ServerError, faulty.Timeout, faulty.Reset, faulty.Slow}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case has its own server and stores, and mostly waits on faults
			ctx := context.Background()
			e := newEnv(t)
			fcfg := faulty.Config{Seed: 11, Rate: 0.3, Delay: time.Millisecond, Hang: 25 * time.Millisecond}
			w, wf := e.faultyHost("writer", fcfg, tc.retry)
			fcfg.Seed, fcfg.Faults = 12, tc.readerFaults
			r, rf := e.faultyHost("reader", fcfg, tc.retry)
			// Without retries every blob call of an attempt must succeed: a blob
			// found present costs a stat and a verifying get, an absent one a
			// stat and a put (a lost ack stores it, so the next attempt verifies
			// it), each failing with 0.2-0.24 here — about 0.6 a blob, 0.14 for
			// an attempt of four. The scan's workers stop at the first failure,
			// so which calls an attempt makes depends on their interleaving: the
			// cap bounds the loop (0.86^200 < 1e-12), it is not a deterministic
			// count (40 runs needed at most 9 to 24 attempts a round).
			const maxCommitAttempts = 200
			rnd := rand.New(rand.NewPCG(5, 5))
			failedCommits, failedSyncs, mostAttempts := 0, 0, 0
			for i := range 12 {
				for j := range 3 {
					path := fmt.Sprintf("data/t/m%d/d/%d/raw", (i+j)%4, j)
					writeFile(t, w, path, strings.Repeat(fmt.Sprintf("%d-%d ", i, j), 1+rnd.IntN(8000)))
				}
				for attempt := 1; ; attempt++ {
					before, err := e.log.LastSeq(ctx)
					if err != nil {
						t.Fatal(err)
					}
					_, err = w.Commit(ctx, CommitOptions{Message: fmt.Sprint("round ", i)})
					if err == nil {
						mostAttempts = max(mostAttempts, attempt)
						break
					}
					failedCommits++
					if tc.retry != nil {
						t.Fatalf("round %d: commit failed with retries: %v", i, err)
					}
					if !strings.Contains(err.Error(), "upload") && !strings.Contains(err.Error(), "blob") {
						t.Fatalf("round %d: commit failed with an unclear error: %v", i, err)
					}
					if after, _ := e.log.LastSeq(ctx); after != before {
						t.Fatalf("round %d: a failed commit published seqs %d..%d", i, before+1, after)
					}
					if attempt == maxCommitAttempts {
						t.Fatalf("round %d: %d failed commits", i, attempt)
					}
				}
				if _, err := r.Sync(ctx, SyncOptions{}); err != nil {
					failedSyncs++
					if tc.retry != nil {
						t.Fatalf("round %d: sync failed with retries: %v", i, err)
					}
				}
				e.checkContent(ctx, r)
			}
			refs := e.checkNoDangling(ctx)
			wf.SetEnabled(false)
			rf.SetEnabled(false)
			mustSync(t, r, SyncOptions{})
			mustSync(t, w, SyncOptions{})
			if diff := cmp.Diff(cacheFiles(t, w), cacheFiles(t, r)); diff != "" {
				t.Fatalf("caches differ after the faults stopped (-writer +reader):\n%s", diff)
			}
			t.Logf("failed commits %d (at most %d attempts a round), failed syncs %d, blob references checked %d; faults: writer %v, reader %v",
				failedCommits, mostAttempts, failedSyncs, refs, wf.Counts(), rf.Counts())
			if wf.Total() == 0 || rf.Total() == 0 {
				t.Fatal("no fault injected")
			}
		})
	}
}

// TestTruncatedBlobNeverApplied: a reader whose every download is cut short
// (with a clean end of body) fails its sync with ErrChecksum, writes nothing,
// and keeps its HWM (I5).
func TestTruncatedBlobNeverApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	w := e.host("writer")
	writeFile(t, w, "audit/a", strings.Repeat("a", 1000))
	mustCommit(t, w, "a")
	r, _ := e.faultyHost("reader", faulty.Config{Seed: 1, Rate: 1, Faults: []faulty.Fault{faulty.Truncate}}, nil)
	_, err := r.Sync(ctx, SyncOptions{})
	if !errors.Is(err, ledger.ErrChecksum) {
		t.Fatalf("sync through truncated bodies: %v, want ErrChecksum", err)
	}
	if _, ok := readFile(t, r, "audit/a"); ok {
		t.Fatal("a truncated download was written to the cache")
	}
	if hwm := hwmOf(t, r); hwm != 0 {
		t.Fatalf("HWM %d after a failed sync, want 0", hwm)
	}
}
