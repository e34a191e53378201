package projector

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

func TestRestore(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		c := newCore(t, baseState(), Config{Lazy: lazy})
		// A snapshot older than the state: partition a back at modelSeq 1, b
		// gone, c new; the HWM moves back.
		to := State{
			Ledger: testLedger, HWM: 4,
			Marks: map[string]Mark{"data--m--a": {1, 2}, "data--m--c": {1, 4}},
			Files: map[string]File{"data/m/a/d/1/raw": *fileOf("a1"), "data/m/c/d/1/raw": *fileOf("c1")},
		}
		seqs := map[string]ledger.Seq{"data/m/a/d/1/raw": 2, "data/m/c/d/1/raw": 4}
		if err := c.Restore(to, seqs, []string{"data/m/x/d/1/raw"}); err != nil {
			t.Fatal(err)
		}
		rd := c.mustReady()
		wop := OpWrite
		wnew := func(s string) *File { return fileOf(s) }
		if lazy {
			wop = OpLazy
			wnew = func(s string) *File { f := fileOf(s); f.Lazy = true; return f }
		}
		want := Ready{
			Ledger: testLedger, HWM: 4, Reset: true, Marks: to.Marks,
			Changes: []Change{
				{Path: "data/m/a/d/1/raw", Op: wop, Old: fileOf("a2"), New: wnew("a1"), Seq: 2},
				{Path: "data/m/b/d/1/raw", Op: OpDelete, Old: fileOf("b1")},
				{Path: "data/m/c/d/1/raw", Op: wop, New: wnew("c1"), Seq: 4},
				{Path: "data/m/x/d/1/raw", Op: OpDelete},
			},
		}
		if d := cmp.Diff(want, rd, cmpReady); d != "" {
			t.Fatalf("lazy %v: Ready (-want +got):\n%s", lazy, d)
		}
		wantSync := []Sync{{"data/m/a/d/1/raw", !lazy}, {"data/m/b/d/1/raw", false}, {"data/m/c/d/1/raw", !lazy}, {"data/m/x/d/1/raw", false}}
		if d := cmp.Diff(wantSync, rd.MustSync()); d != "" {
			t.Fatalf("lazy %v: MustSync (-want +got):\n%s", lazy, d)
		}
		c.persistAdvance(rd)
		got := c.mustState()
		wantSt := to.Clone()
		if lazy {
			for p, f := range wantSt.Files {
				f.Lazy = true
				wantSt.Files[p] = f
			}
		}
		if d := cmp.Diff(wantSt, got); d != "" {
			t.Fatalf("lazy %v: state after the restore (-want +got):\n%s", lazy, d)
		}
		// The restored core reads on from the snapshot's seq.
		if v, err := c.Step(Full, rec("b", 5, 1, 0, "b1")); err != nil || v != Apply {
			t.Fatalf("step after restore: %v, %v", v, err)
		}
	}
}

func TestRestoreRefuses(t *testing.T) {
	c := newCore(t, baseState(), Config{})
	if _, err := c.Step(Full, rec("a", 6, 3, 5, "a3")); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(baseState(), nil, nil); !errors.Is(err, ErrReadyOutstanding) {
		t.Fatalf("restore with staged work: %v, want ErrReadyOutstanding", err)
	}
	c.Discard()
	other := baseState()
	other.Ledger = "01890000-0000-7000-8000-000000000001"
	if err := c.Restore(other, nil, nil); !errors.Is(err, ledger.ErrLineage) {
		t.Fatalf("restore of another ledger: %v, want ErrLineage", err)
	}
	if err := c.Restore(baseState(), nil, []string{"../x"}); err == nil {
		t.Fatal("restore with an invalid stray path succeeded")
	}
	if c.HasReady() {
		t.Fatal("a refused restore staged work")
	}
}

// TestMustSyncNamesEveryPath: whatever a Ready does to a path, the state it
// persists claims the path's content or its absence, so MustSync names it.
func TestMustSyncNamesEveryPath(t *testing.T) {
	c := newCore(t, baseState(), Config{Lazy: true})
	del := rec("b", 6, 2, 3, "")
	del.Event.Entries = []ledger.Entry{{Path: "data/m/b/d/1/raw", Deleted: true}}
	for _, r := range []ledger.Record{rec("a", 7, 3, 5, "a3"), del, func() ledger.Record {
		r := rec("c", 8, 1, 0, "c1")
		r.Event.Entries = []ledger.Entry{fileEntry("data/m/c/d/1/attributes.yaml", "c1"), fileEntry("data/m/c/d/1/raw", "c1")}
		return r
	}()} {
		if _, err := c.Step(Full, r); err != nil {
			t.Fatal(err)
		}
	}
	rd := c.mustReady()
	want := []Sync{
		{"data/m/a/d/1/raw", false}, // lazy: absent
		{"data/m/b/d/1/raw", false}, // deleted
		{"data/m/c/d/1/attributes.yaml", true},
		{"data/m/c/d/1/raw", false},
	}
	if d := cmp.Diff(want, rd.MustSync()); d != "" {
		t.Fatalf("MustSync (-want +got):\n%s", d)
	}
}
