package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/audit"
	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/ledger"
)

// commit returns a one-part commit at seq.
func commit(seq ledger.Seq) consumers.Commit {
	path := "audit/f"
	r := ledger.Record{Seq: seq, Event: ledger.Event{
		V: 1, Ledger: "0190a0b0-0000-7000-8000-00000000000a", Commit: "0190a0b0-0000-7000-8000-000000000001",
		Host: "h", At: time.Unix(100, 0), Partition: "audit", ModelSeq: uint64(seq), Prev: seq - 1, Parts: 1, Part: 1,
		Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: 3, Mode: 0o644}},
	}}
	c, err := consumers.NewCommit([]ledger.Record{r})
	if err != nil {
		panic(err)
	}
	return c
}

// readSeqs returns the seqs of the lines of the files, in order.
func readSeqs(t *testing.T, paths ...string) []ledger.Seq {
	t.Helper()
	var out []ledger.Seq
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var s consumers.Summary
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatalf("%s: bad line %q: %v", p, sc.Text(), err)
			}
			out = append(out, s.Seq)
		}
		f.Close()
	}
	return out
}

func handle(t *testing.T, w *audit.Writer, seqs ...ledger.Seq) {
	t.Helper()
	for _, s := range seqs {
		if err := w.Handle(context.Background(), commit(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func seqRange(from, to ledger.Seq) []ledger.Seq {
	var out []ledger.Seq
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestReopenSkipsWrittenAndDropsPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.Open(audit.Config{Ledger: "l", Path: path, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	handle(t, w, 1, 2, 3)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of writing seq 4's line.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"ledger":"l","seq":4,"comm`)
	f.Close()

	w, err = audit.Open(audit.Config{Ledger: "l", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.LastSeq(); got != 3 {
		t.Errorf("LastSeq after reopen = %d, want 3", got)
	}
	handle(t, w, 2, 3, 4, 5) // 2 and 3 delivered again
	w.Close()
	if diff := cmp.Diff(seqRange(1, 5), readSeqs(t, path)); diff != "" {
		t.Errorf("file seqs (-want +got):\n%s", diff)
	}
}

func TestRotationKeepsEveryLineOnceAndPrunes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	cfg := audit.Config{Ledger: "l", Path: path, MaxSize: 2000}
	w, err := audit.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for s := ledger.Seq(1); s <= 40; s++ {
		handle(t, w, s)
	}
	w.Close()
	files := rotatedFiles(t, path)
	if len(files) < 3 {
		t.Fatalf("%d rotated files, want several", len(files))
	}
	if diff := cmp.Diff(seqRange(1, 40), readSeqs(t, append(files, path)...)); diff != "" {
		t.Errorf("seqs across rotated files (-want +got):\n%s", diff)
	}
	for _, f := range files {
		if fi, _ := os.Stat(f); fi.Size() > cfg.MaxSize {
			t.Errorf("%s: %d bytes, max %d", f, fi.Size(), cfg.MaxSize)
		}
	}

	// A current file emptied by a rotation: the last seq comes from the newest
	// rotated file's name.
	last := readSeqs(t, path)
	if err := os.Rename(path, path+"."+itoa(last[len(last)-1])); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.MaxFiles = 2
	w, err = audit.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.LastSeq() != 40 {
		t.Errorf("LastSeq from rotated files = %d, want 40", w.LastSeq())
	}
	for s := ledger.Seq(41); s <= 80; s++ {
		handle(t, w, s)
	}
	w.Close()
	if n := len(rotatedFiles(t, path)); n != 2 {
		t.Errorf("%d rotated files kept, want MaxFiles = 2", n)
	}
}

func itoa(s ledger.Seq) string { b, _ := json.Marshal(s); return string(b) }

func rotatedFiles(t *testing.T, path string) []string {
	t.Helper()
	m, _ := filepath.Glob(path + ".*")
	var out []string
	for _, f := range m {
		if !strings.HasSuffix(f, ".lock") {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return len(out[i]) < len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j]
	})
	return out
}

func TestSecondWriterIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	w, err := audit.Open(audit.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := audit.Open(audit.Config{Path: path}); !errors.Is(err, audit.ErrInUse) {
		t.Errorf("second Open = %v, want ErrInUse", err)
	}
}

func TestNotAnAuditFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	os.WriteFile(path, []byte("hello\n"), 0o644)
	if _, err := audit.Open(audit.Config{Path: path}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Open = %v, want ErrInvalid", err)
	}
}

func TestStreamOutput(t *testing.T) {
	var out bytes.Buffer
	w, err := audit.Open(audit.Config{Ledger: "l", Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	handle(t, w, 1, 2, 2)
	var s consumers.Summary
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &s) != nil || s.Seq != 2 || s.Ledger != "l" ||
		!slices.Equal(s.Partitions, []string{"audit"}) || s.Files != 1 || s.Bytes != 3 || s.Entries[0].Path != "audit/f" {
		t.Errorf("output = %s", out.String())
	}
}

// TestWithRunner runs the writer on a durable consumer across a restart.
func TestWithRunner(t *testing.T) {
	l := consumertest.New(t, "t")
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var want []ledger.Seq
	runOnce := func(n int) {
		for range n {
			s := l.Commit(t, "a", "b")
			want = append(want, s[len(s)-1])
		}
		w, err := audit.Open(audit.Config{Ledger: l.Name, Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: "audit", Handler: w})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(consumertest.Ctx(t))
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		consumertest.Wait(t, 20*time.Second, "all commits", func() bool { return r.Stats().Seq >= want[len(want)-1] })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	runOnce(10)
	runOnce(5)
	if diff := cmp.Diff(want, readSeqs(t, path)); diff != "" {
		t.Errorf("audit file (-want +got):\n%s", diff)
	}
}

// TestRefusesGap: a credential that may reset the audit's durable consumer
// (the tooling role, which its own restart needs) moves it past seq 2. The
// audit does not record seq 3 after seq 1: it stops, naming seq 2 (on the
// main of issue 26 the file read 1 3, silently). Both ways out converge: the
// consumer started again at seq 2 records 2 and 3; accepting the gap records
// 3. A quarantined seq is no gap.
func TestRefusesGap(t *testing.T) {
	l := consumertest.New(t, "gap")
	ctx := consumertest.Ctx(t)
	dir := t.TempDir()
	run := func(path, name string, start consumers.Start, acceptTo ledger.Seq, until ledger.Seq) error {
		t.Helper()
		w, err := audit.Open(audit.Config{Ledger: l.Name, Path: path, Log: l.Log, AcceptGapTo: acceptTo})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, err := consumers.New(consumers.Config{Feed: l.Feed, Log: l.Log, Name: name, Handler: w, Start: start})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		for {
			select {
			case err := <-done:
				return err
			case <-time.After(5 * time.Millisecond):
			}
			if r.Stats().Seq >= until {
				cancel()
				return <-done
			}
		}
	}
	path := filepath.Join(dir, "audit.jsonl")
	l.Commit(t, "a")
	path2 := filepath.Join(dir, "audit2.jsonl")
	for _, c := range [][2]string{{path, "audit"}, {path2, "audit2"}} {
		if err := run(c[0], c[1], consumers.StartAll, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	l.Commit(t, "a")
	l.Commit(t, "a")
	if err := l.Mem.Reset("audit", 3); err != nil {
		t.Fatal(err)
	}
	err := run(path, "audit", consumers.StartAll, 0, 3)
	var ge *audit.GapError
	if !errors.Is(err, consumers.ErrStop) || !errors.As(err, &ge) || ge.Last != 1 || ge.Next != 3 || !slices.Equal(ge.Missed, []ledger.Seq{2}) {
		t.Fatalf("audit past a moved consumer = %v, want a GapError naming seq 2 after 1", err)
	}
	if got := readSeqs(t, path); !slices.Equal(got, []ledger.Seq{1}) {
		t.Fatalf("audit file after the refusal = %v, want [1]", got)
	}
	// Way out 1: the admin deletes the consumer, and it starts again at 2.
	if err := consumers.Delete(ctx, l.Feed, "audit"); err != nil {
		t.Fatal(err)
	}
	if err := run(path, "audit", consumers.StartAt(ge.Last+1), 0, 3); err != nil {
		t.Fatal(err)
	}
	if got := readSeqs(t, path); !slices.Equal(got, []ledger.Seq{1, 2, 3}) {
		t.Errorf("audit file after the consumer started again = %v, want [1 2 3]", got)
	}
	// Way out 2, on a second file and consumer: the gap accepted.
	if err := l.Mem.Reset("audit2", 3); err != nil {
		t.Fatal(err)
	}
	if err := run(path2, "audit2", consumers.StartAll, 0, 3); !errors.As(err, &ge) {
		t.Fatalf("second audit past a moved consumer = %v", err)
	}
	if err := run(path2, "audit2", consumers.StartAll, ge.Next, 3); err != nil {
		t.Fatal(err)
	}
	if got := readSeqs(t, path2); !slices.Equal(got, []ledger.Seq{1, 3}) {
		t.Errorf("audit file with the gap accepted = %v, want [1 3]", got)
	}
	// A quarantined seq is no gap: seq 4 quarantined, the consumer moved past
	// it, the audit records 5 after 3.
	l.Commit(t, "a")
	if _, err := l.Log.Quarantine(ctx, ledger.Quarantine{Seq: 4, Reason: "test", By: "admin", At: time.Now()}, true); err != nil {
		t.Fatal(err)
	}
	s := l.Commit(t, "b")
	if err := l.Mem.Reset("audit", s[0]); err != nil {
		t.Fatal(err)
	}
	if err := run(path, "audit", consumers.StartAll, 0, s[0]); err != nil {
		t.Fatalf("audit past a quarantined seq: %v", err)
	}
	if got := readSeqs(t, path); !slices.Equal(got, []ledger.Seq{1, 2, 3, s[0]}) {
		t.Errorf("audit file past a quarantined seq = %v, want [1 2 3 %d]", got, s[0])
	}
}
