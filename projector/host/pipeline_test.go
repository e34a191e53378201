package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A push's conflict settled by its Settle mode: the settlement moves the
// local change aside (here: renames it, as swamp's renumbering moves a data
// version), the push scans its whole scope again and publishes — one Commit,
// no error; a settlement that settles nothing is tried Policy.Settles times,
// then the conflict is the push's error, the files kept.
func TestCommitSettle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "data/m/x/d/1/raw", "base")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	writeFile(t, a, "data/m/x/d/2/raw", "run on a")
	mustCommit(t, a, "")
	writeFile(t, b, "data/m/x/d/2/raw", "run on b")

	settles := 0
	res, err := b.Commit(context.Background(), CommitOptions{Message: "run", Changed: []string{"data/m/x/d/2"}, Settle: func(ctx context.Context, ce *ConflictError) error {
		settles++
		if len(ce.Paths) != 1 || ce.Paths[0] != "data/m/x/d/2/raw" {
			t.Errorf("settle of %q, want the conflicting data/m/x/d/2/raw", ce.Paths)
		}
		root := b.Dir().Root()
		if err := os.MkdirAll(filepath.Join(root, "data/m/x/d/3"), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(root, "data/m/x/d/2/raw"), filepath.Join(root, "data/m/x/d/3/raw")); err != nil {
			return err
		}
		_, err := b.Sync(ctx, SyncOptions{})
		return err
	}})
	if err != nil || settles != 1 || len(res.Commits) != 1 || res.Written != 1 {
		t.Fatalf("commit settled once: %+v, %v (settles %d)", res, err, settles)
	}
	mustSync(t, a, SyncOptions{})
	for rel, want := range map[string]string{"data/m/x/d/2/raw": "run on a", "data/m/x/d/3/raw": "run on b"} {
		if got, _ := readFile(t, a, rel); got != want {
			t.Fatalf("a's %s: %q, want %q", rel, got, want)
		}
	}

	// A settlement that settles nothing.
	writeFile(t, a, "data/m/x/d/4/raw", "run on a")
	mustCommit(t, a, "")
	writeFile(t, b, "data/m/x/d/4/raw", "run on b")
	settles = 0
	b.cfg.Policy = Policy{Settles: 2}
	res, err = b.Commit(context.Background(), CommitOptions{Settle: func(context.Context, *ConflictError) error { settles++; return nil }})
	var ce *ConflictError
	if !errors.As(err, &ce) || settles != 2 || len(res.Commits) != 0 || res.Attempts != 3 {
		t.Fatalf("commit whose settlement settles nothing: %+v, %v (settles %d); want the conflict after 2 settles, 3 plans", res, err, settles)
	}
	if got, _ := readFile(t, b, "data/m/x/d/4/raw"); got != "run on b" {
		t.Fatalf("b's file after the failed settles: %q", got)
	}
	// A settlement's error ends the push.
	boom := errors.New("boom")
	if _, err := b.Commit(context.Background(), CommitOptions{Settle: func(context.Context, *ConflictError) error { return boom }}); !errors.Is(err, boom) {
		t.Fatalf("commit whose settlement fails: %v, want its error", err)
	}
}

// The policy's conflict rounds bound one commit's publishes: a commit that
// meets a chain conflict on every publish gives up after Policy.Conflicts.
func TestCommitConflictRounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	writeFile(t, a, "audit/a", "0")
	mustCommit(t, a, "")
	mustSync(t, b, SyncOptions{})
	hooked := &hookedLog{CommitLog: e.log}
	b.cfg.Log = hooked
	b.cfg.Policy = Policy{Conflicts: 3}
	n := 0
	hooked.beforeAppend = func() {
		// a extends the partition before every publish of b's.
		n++
		writeFile(t, a, "audit/a", string(rune('0'+n)))
		mustCommit(t, a, "")
	}
	writeFile(t, b, "audit/b", "b")
	res, err := b.Commit(context.Background(), CommitOptions{})
	if err == nil || n != 3 || res.Attempts != 3 || res.Pulled != 2 {
		t.Fatalf("commit meeting a conflict on every publish: %+v, %v after %d publishes; want to give up after 3", res, err, n)
	}
	hooked.beforeAppend = nil
	if r := mustCommit(t, b, ""); r.Written != 1 {
		t.Fatalf("the next commit: %+v", r)
	}
}
