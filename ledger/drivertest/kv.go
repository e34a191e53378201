package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// TestKV runs the KV conformance suite. newKV must return a new, empty bucket on
// each call; it is called once per subtest, with the subtest's t.
func TestKV(t *testing.T, newKV func(t *testing.T) ledger.KV) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, kv ledger.KV)
	}{
		{"GetMissing", testKVGetMissing},
		{"PutGet", testKVPutGet},
		{"CreateOnce", testKVCreateOnce},
		{"CreateAfterDelete", testKVCreateAfterDelete},
		{"UpdateChecksRevision", testKVUpdate},
		{"CreatedIsLastWrite", testKVCreatedIsLastWrite},
		{"DeleteChecksRevision", testKVDelete},
		{"DeleteMissing", testKVDeleteMissing},
		{"List", testKVList},
		{"OneCreateWins", testKVOneCreateWins},
		{"CancelledContext", testKVCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, testContext(t), newKV(t))
		})
	}
}

func kvGet(t *testing.T, ctx context.Context, kv ledger.KV, key string) ledger.KVEntry {
	t.Helper()
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q) = %v", key, err)
	}
	return e
}

func wantKVErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v, want an error wrapping %v", what, err, want)
	}
}

func testKVGetMissing(t *testing.T, ctx context.Context, kv ledger.KV) {
	_, err := kv.Get(ctx, "missing")
	wantKVErr(t, "Get(missing)", err, ledger.ErrNotFound)
}

func testKVPutGet(t *testing.T, ctx context.Context, kv ledger.KV) {
	before := time.Now().Add(-time.Minute)
	r1, err := kv.Put(ctx, "a.b", []byte("one"))
	if err != nil || r1 == 0 {
		t.Fatalf("Put = %d, %v; want a revision > 0", r1, err)
	}
	e := kvGet(t, ctx, kv, "a.b")
	if e.Key != "a.b" || string(e.Value) != "one" || e.Revision != r1 {
		t.Fatalf("Get = %+v, want key a.b, value one, revision %d", e, r1)
	}
	if e.Created.Before(before) || e.Created.After(time.Now().Add(time.Minute)) {
		t.Errorf("Created = %v, want about now", e.Created)
	}
	r2, err := kv.Put(ctx, "a.b", []byte("two"))
	if err != nil || r2 <= r1 {
		t.Fatalf("second Put = %d, %v; want a revision > %d", r2, err, r1)
	}
	if e := kvGet(t, ctx, kv, "a.b"); string(e.Value) != "two" || e.Revision != r2 {
		t.Fatalf("Get after second Put = %+v, want two at %d", e, r2)
	}
}

func testKVCreateOnce(t *testing.T, ctx context.Context, kv ledger.KV) {
	r, err := kv.Create(ctx, "k", []byte("first"))
	if err != nil || r == 0 {
		t.Fatalf("Create = %d, %v", r, err)
	}
	_, err = kv.Create(ctx, "k", []byte("second"))
	wantKVErr(t, "second Create", err, ledger.ErrConflict)
	if e := kvGet(t, ctx, kv, "k"); string(e.Value) != "first" || e.Revision != r {
		t.Fatalf("after a refused Create: %+v, want first at %d", e, r)
	}
}

func testKVCreateAfterDelete(t *testing.T, ctx context.Context, kv ledger.KV) {
	r, err := kv.Create(ctx, "k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "k", r); err != nil {
		t.Fatalf("Delete at the current revision = %v", err)
	}
	_, err = kv.Get(ctx, "k")
	wantKVErr(t, "Get after Delete", err, ledger.ErrNotFound)
	r2, err := kv.Create(ctx, "k", []byte("v2"))
	if err != nil || r2 <= r {
		t.Fatalf("Create after Delete = %d, %v; want a revision > %d", r2, err, r)
	}
}

func testKVUpdate(t *testing.T, ctx context.Context, kv ledger.KV) {
	r1, err := kv.Create(ctx, "k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := kv.Update(ctx, "k", []byte("v2"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("Update at the current revision = %d, %v", r2, err)
	}
	_, err = kv.Update(ctx, "k", []byte("stale"), r1)
	wantKVErr(t, "Update at a stale revision", err, ledger.ErrConflict)
	if e := kvGet(t, ctx, kv, "k"); string(e.Value) != "v2" {
		t.Fatalf("a refused Update changed the value: %+v", e)
	}
	_, err = kv.Update(ctx, "never-set", []byte("x"), r2)
	wantKVErr(t, "Update of a key with no value", err, ledger.ErrConflict)
	if err := kv.Delete(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	_, err = kv.Update(ctx, "k", []byte("v3"), r2)
	wantKVErr(t, "Update of a deleted key", err, ledger.ErrConflict)
}

// testKVCreatedIsLastWrite: an entry's time is its last write's, by the
// bucket's clock — what swamp's lock expiry reads (a renewal is an Update).
func testKVCreatedIsLastWrite(t *testing.T, ctx context.Context, kv ledger.KV) {
	r1, err := kv.Create(ctx, "k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	e1 := kvGet(t, ctx, kv, "k")
	if _, err := kv.Update(ctx, "k", []byte("v2"), r1); err != nil {
		t.Fatal(err)
	}
	e2 := kvGet(t, ctx, kv, "k")
	if !e2.Created.After(e1.Created) {
		t.Fatalf("after an Update the entry's time is %v, not after its Create's %v", e2.Created, e1.Created)
	}
	if l, err := kv.List(ctx, "k"); err != nil || len(l) != 1 || !l[0].Created.Equal(e2.Created) {
		t.Fatalf("List = %+v, %v; want the entry at %v", l, err, e2.Created)
	}
}

func testKVDelete(t *testing.T, ctx context.Context, kv ledger.KV) {
	r1, err := kv.Create(ctx, "k", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := kv.Put(ctx, "k", []byte("v2"))
	if err != nil {
		t.Fatal(err)
	}
	wantKVErr(t, "Delete at a stale revision", kv.Delete(ctx, "k", r1), ledger.ErrConflict)
	if e := kvGet(t, ctx, kv, "k"); e.Revision != r2 {
		t.Fatalf("a refused Delete changed the key: %+v", e)
	}
	if err := kv.Delete(ctx, "k", r2); err != nil {
		t.Fatalf("Delete at the current revision = %v", err)
	}
	wantKVErr(t, "Delete of a deleted key at its old revision", kv.Delete(ctx, "k", r2), ledger.ErrConflict)
}

func testKVDeleteMissing(t *testing.T, ctx context.Context, kv ledger.KV) {
	if err := kv.Delete(ctx, "never-set", 0); err != nil {
		t.Fatalf("Delete of a key with no value, unconditionally = %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := kv.Delete(ctx, "k", 0); err != nil {
			t.Fatalf("unconditional Delete #%d = %v", i+1, err)
		}
	}
}

func testKVList(t *testing.T, ctx context.Context, kv ledger.KV) {
	if got, err := kv.List(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty bucket = %v, %v", got, err)
	}
	for _, k := range []string{"lock.b", "lock.a", "cp.x", "lock.c"} {
		if _, err := kv.Put(ctx, k, []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, "lock.c", 0); err != nil {
		t.Fatal(err)
	}
	got, err := kv.List(ctx, "lock.")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range got {
		if string(e.Value) != "v-"+e.Key || e.Revision == 0 {
			t.Errorf("List entry %+v: wrong value or revision", e)
		}
		keys = append(keys, e.Key)
	}
	if fmt.Sprint(keys) != "[lock.a lock.b]" {
		t.Fatalf("List(lock.) keys = %v, want [lock.a lock.b] (sorted, live only)", keys)
	}
	all, err := kv.List(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("List() = %d entries, %v; want 3", len(all), err)
	}
}

// testKVOneCreateWins: of many concurrent Creates of one key, exactly one
// succeeds — the property swamp's locks rest on.
func testKVOneCreateWins(t *testing.T, ctx context.Context, kv ledger.KV) {
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []int
	)
	for i := range n {
		wg.Go(func() {
			_, err := kv.Create(ctx, "lock", fmt.Appendf(nil, "%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, i)
			case !errors.Is(err, ledger.ErrConflict):
				t.Errorf("Create #%d = %v, want nil or ErrConflict", i, err)
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d Creates won (%v), want exactly 1", len(wins), wins)
	}
	if e := kvGet(t, ctx, kv, "lock"); string(e.Value) != fmt.Sprint(wins[0]) {
		t.Fatalf("value %q, want the winner's %d", e.Value, wins[0])
	}
}

func testKVCancelled(t *testing.T, ctx context.Context, kv ledger.KV) {
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := kv.Put(cctx, "k", []byte("v")); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	if _, err := kv.Get(cctx, "k"); err == nil {
		t.Fatal("Get with a cancelled context succeeded")
	}
}
