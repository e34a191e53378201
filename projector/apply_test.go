package projector

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/syncledger/syncledger/ledger"
)

var cmpReady = cmpopts.IgnoreUnexported(Ready{})

func commitID(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012x", n) }

// rec forges a record: partition data--m--<p>, one entry writing content at
// data/m/<p>/d/1/raw, part 1/1 of commit n unless changed by the caller.
func rec(p string, seq ledger.Seq, modelSeq uint64, prev ledger.Seq, content string) ledger.Record {
	return ledger.Record{Seq: seq, Event: ledger.Event{
		V: ledger.FormatVersion, Ledger: testLedger, Commit: commitID(int(seq)), Host: "h", At: testTime,
		Partition: "data--m--" + p, ModelSeq: modelSeq, Prev: prev, Parts: 1, Part: 1,
		Entries: []ledger.Entry{fileEntry("data/m/"+p+"/d/1/raw", content)},
	}}
}

func fileEntry(path, content string) ledger.Entry {
	return ledger.Entry{Path: path, SHA256: ledger.DigestOf([]byte(content)), Size: int64(len(content)), Mode: 0o644}
}

func fileOf(content string) *File {
	return &File{SHA256: ledger.DigestOf([]byte(content)), Size: int64(len(content)), Mode: 0o644}
}

func part(r ledger.Record, commit, part, parts int) ledger.Record {
	r.Event.Commit, r.Event.Part, r.Event.Parts = commitID(commit), part, parts
	return r
}

// baseState: partition a at modelSeq 2 (seq 5), b at modelSeq 1 (seq 3), HWM 5.
func baseState() State {
	return State{
		Ledger: testLedger, HWM: 5,
		Marks: map[string]Mark{"data--m--a": {2, 5}, "data--m--b": {1, 3}},
		Files: map[string]File{"data/m/a/d/1/raw": *fileOf("a2"), "data/m/b/d/1/raw": *fileOf("b1")},
	}
}

func newCore(t *testing.T, st State, cfg Config) *Core {
	t.Helper()
	c, err := newCoreOf(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStepRules(t *testing.T) {
	type offer struct {
		mode Mode
		rec  ledger.Record
	}
	applyA := rec("a", 6, 3, 5, "a3")
	for _, tc := range []struct {
		name    string
		prior   []offer // staged first, must succeed
		mode    Mode
		rec     ledger.Record
		want    Verdict
		wantErr error
		wantGap *GapError
		ready   Ready // after the offer

		unresolved bool // Classify says Apply, Step refuses
	}{
		{name: "rule 1: the mark itself", rec: rec("a", 5, 2, 1, "a2"), want: Skip, ready: Ready{HWM: 5}},
		{name: "rule 1: below the mark", rec: rec("a", 1, 1, 0, "a1"), want: Skip, ready: Ready{HWM: 5}},
		{
			name: "rule 2: apply, full: HWM moves", rec: applyA, want: Apply,
			ready: Ready{
				HWM:     6,
				Changes: []Change{{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6}},
				Marks:   map[string]Mark{"data--m--a": {3, 6}},
			},
		},
		{
			name: "rule 2: apply, scoped: HWM stays", mode: Scoped, rec: applyA, want: Apply,
			ready: Ready{
				HWM:     5,
				Changes: []Change{{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6}},
				Marks:   map[string]Mark{"data--m--a": {3, 6}},
			},
		},
		{
			name:    "rule 3: gap",
			rec:     rec("a", 9, 4, 8, "a4"),
			wantErr: ErrGap,
			wantGap: &GapError{Partition: "data--m--a", Mark: Mark{2, 5}, Seq: 9, ModelSeq: 4, From: 6, To: 8},
			ready:   Ready{HWM: 5},
		},
		{
			name:    "rule 3 after staged work: the staged view's mark",
			prior:   []offer{{Full, applyA}},
			rec:     rec("a", 9, 5, 8, "a5"),
			wantErr: ErrGap,
			wantGap: &GapError{Partition: "data--m--a", Mark: Mark{3, 6}, Seq: 9, ModelSeq: 5, From: 7, To: 8},
			ready: Ready{
				HWM:     6,
				Changes: []Change{{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6}},
				Marks:   map[string]Mark{"data--m--a": {3, 6}},
			},
		},
		{name: "a new partition starts at modelSeq 1", rec: rec("c", 6, 1, 0, "c1"), want: Apply, ready: Ready{
			HWM:     6,
			Changes: []Change{{Path: "data/m/c/d/1/raw", Op: OpWrite, New: fileOf("c1"), Seq: 6}},
			Marks:   map[string]Mark{"data--m--c": {1, 6}},
		}},
		{name: "diverged: another modelSeq at the mark", rec: rec("a", 5, 3, 4, "x"), wantErr: ErrDiverged, ready: Ready{HWM: 5}},
		{name: "diverged: modelSeq not below the mark's", rec: rec("a", 4, 2, 1, "x"), wantErr: ErrDiverged, ready: Ready{HWM: 5}},
		{name: "diverged: successor with another prev", rec: rec("a", 8, 3, 7, "x"), wantErr: ErrDiverged, ready: Ready{HWM: 5}},
		{name: "diverged: prev behind the mark", rec: rec("a", 8, 4, 4, "x"), wantErr: ErrDiverged, ready: Ready{HWM: 5}},
		{
			name: "diverged: unapplied event at or below the HWM",
			rec:  rec("b", 4, 2, 3, "b2"), wantErr: ErrDiverged, ready: Ready{HWM: 5},
		},
		{name: "lineage", rec: func() ledger.Record { r := applyA; r.Event.Ledger = otherLedger; return r }(), wantErr: ledger.ErrLineage, ready: Ready{HWM: 5}},
		{name: "part beyond parts", rec: part(applyA, 6, 3, 2), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{name: "part 0", rec: part(applyA, 6, 0, 1), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{name: "HWM+1 is not a part 1", rec: part(applyA, 6, 2, 2), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{
			name:  "part 1 after an unfinished commit",
			prior: []offer{{Full, part(applyA, 6, 1, 2)}},
			rec:   rec("c", 7, 1, 0, "c1"), wantErr: ledger.ErrInvalid,
			ready: Ready{
				HWM:     5,
				Changes: []Change{{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6}},
				Marks:   map[string]Mark{"data--m--a": {3, 6}},
			},
		},
		{
			name:  "a part of another commit before a read part 2",
			prior: []offer{{Full, part(rec("c", 8, 1, 0, "c1"), 7, 2, 2)}},
			rec:   rec("a", 7, 3, 5, "a3"), wantErr: ledger.ErrInvalid,
			ready: Ready{
				HWM:     5,
				Changes: []Change{{Path: "data/m/c/d/1/raw", Op: OpWrite, New: fileOf("c1"), Seq: 8}},
				Marks:   map[string]Mark{"data--m--c": {1, 8}},
			},
		},
		{
			name:  "the same seq read as another commit",
			prior: []offer{{Full, applyA}},
			rec:   part(rec("a", 6, 3, 5, "a3"), 99, 1, 1), wantErr: ledger.ErrInvalid,
			ready: Ready{
				HWM:     6,
				Changes: []Change{{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6}},
				Marks:   map[string]Mark{"data--m--a": {3, 6}},
			},
		},
		{
			name: "the parts of a commit read out of order",
			prior: []offer{
				{Full, part(rec("c", 7, 1, 0, "c1"), 6, 2, 2)},
			},
			rec:  part(applyA, 6, 1, 2),
			want: Apply,
			ready: Ready{
				HWM: 7,
				Changes: []Change{
					{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6},
					{Path: "data/m/c/d/1/raw", Op: OpWrite, New: fileOf("c1"), Seq: 7},
				},
				Marks: map[string]Mark{"data--m--a": {3, 6}, "data--m--c": {1, 7}},
			},
		},
		{name: "modelSeq 0", rec: rec("a", 6, 0, 0, "x"), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{name: "modelSeq 1 with a prev", rec: rec("c", 6, 1, 2, "x"), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{name: "prev not below seq", rec: rec("a", 6, 3, 6, "x"), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{name: "seq 0", rec: rec("a", 0, 3, 5, "x"), wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{name: "unknown version", rec: func() ledger.Record { r := applyA; r.Event.V = 2; return r }(), wantErr: ledger.ErrUnknownVersion, ready: Ready{HWM: 5}},
		{
			name: "entry of another partition",
			rec: func() ledger.Record {
				r := rec("a", 6, 3, 5, "x")
				r.Event.Entries = []ledger.Entry{fileEntry("data/m/b/d/1/raw", "x")}
				return r
			}(),
			wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5},
		},
		{
			name: "unresolved manifest: refused for apply",
			rec: func() ledger.Record {
				r := applyA
				r.Event.Entries, r.Event.Manifest = nil, ledger.DigestOf([]byte("manifest"))
				return r
			}(),
			wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}, unresolved: true,
		},
		{
			name: "unresolved manifest: fine for skip",
			rec: func() ledger.Record {
				r := rec("a", 5, 2, 1, "a2")
				r.Event.Entries, r.Event.Manifest = nil, ledger.DigestOf([]byte("manifest"))
				return r
			}(),
			want: Skip, ready: Ready{HWM: 5},
		},
		{
			name: "resolved manifest: entries and digest",
			rec: func() ledger.Record {
				r := applyA
				r.Event.Manifest = ledger.DigestOf([]byte("manifest"))
				return r
			}(),
			want: Apply,
			ready: Ready{
				HWM:     6,
				Changes: []Change{{Path: "data/m/a/d/1/raw", Op: OpWrite, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6}},
				Marks:   map[string]Mark{"data--m--a": {3, 6}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, baseState(), Config{})
			for _, o := range tc.prior {
				if _, err := c.Step(o.mode, o.rec); err != nil {
					t.Fatalf("prior offer of seq %d: %v", o.rec.Seq, err)
				}
			}
			mode := tc.mode
			if mode == 0 {
				mode = Full
			}
			cv, cerr := c.Classify(mode, tc.rec)
			got, err := c.Step(mode, tc.rec)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Step: %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Step error %v, want %v", err, tc.wantErr)
			case got != tc.want:
				t.Fatalf("Step = %v, want %v", got, tc.want)
			}
			// Classify agrees with Step, except that it does not insist on
			// resolved entries.
			wantCV, wantCErr := tc.want, tc.wantErr
			if tc.unresolved {
				wantCV, wantCErr = Apply, nil
			}
			if cv != wantCV || !errors.Is(cerr, wantCErr) {
				t.Errorf("Classify = %v, %v; want %v, %v", cv, cerr, wantCV, wantCErr)
			}
			if tc.wantGap != nil {
				var gap *GapError
				if !errors.As(err, &gap) {
					t.Fatalf("error %v is not a *GapError", err)
				}
				if d := cmp.Diff(tc.wantGap, gap); d != "" {
					t.Errorf("gap (-want +got):\n%s", d)
				}
			}
			if d := cmp.Diff(tc.ready, c.mustReady(), cmpReady, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Ready (-want +got):\n%s", d)
			}
			if d := cmp.Diff(baseState(), c.mustState()); d != "" {
				t.Errorf("durable state changed before Advance (-want +got):\n%s", d)
			}
		})
	}
}

func TestRecordOwn(t *testing.T) {
	two := func() ([]ledger.Event, []ledger.Seq) {
		a, c := part(rec("a", 6, 3, 5, "a3"), 1, 1, 2), part(rec("c", 7, 1, 0, "c1"), 1, 2, 2)
		return []ledger.Event{a.Event, c.Event}, []ledger.Seq{6, 7}
	}
	wantTwo := Ready{
		HWM: 7,
		Changes: []Change{
			{Path: "data/m/a/d/1/raw", Op: OpIndex, Old: fileOf("a2"), New: fileOf("a3"), Seq: 6},
			{Path: "data/m/c/d/1/raw", Op: OpIndex, New: fileOf("c1"), Seq: 7},
		},
		Marks: map[string]Mark{"data--m--a": {3, 6}, "data--m--c": {1, 7}},
	}
	for _, tc := range []struct {
		name    string
		edit    func(evs []ledger.Event, seqs []ledger.Seq) ([]ledger.Event, []ledger.Seq)
		fences  int // the commit's fences: its fence checks at 8, 9, …
		wantErr error
		ready   Ready
	}{
		{name: "at HWM+1", ready: wantTwo},
		{name: "at HWM+1, its two fence checks after it", fences: 2, ready: func() Ready { r := wantTwo; r.HWM = 9; return r }()},
		{
			name: "not at HWM+1, with a fence check: nothing passed",
			edit: func(evs []ledger.Event, _ []ledger.Seq) ([]ledger.Event, []ledger.Seq) {
				return evs, []ledger.Seq{8, 9}
			},
			fences: 1,
			ready: Ready{
				HWM: 5,
				Changes: []Change{
					{Path: "data/m/a/d/1/raw", Op: OpIndex, Old: fileOf("a2"), New: fileOf("a3"), Seq: 8},
					{Path: "data/m/c/d/1/raw", Op: OpIndex, New: fileOf("c1"), Seq: 9},
				},
				Marks: map[string]Mark{"data--m--a": {3, 8}, "data--m--c": {1, 9}},
			},
		},
		{name: "more fences than a batch holds", fences: ledger.MaxBatch - 1, wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5}},
		{
			name: "not at HWM+1: seq 6 unread",
			edit: func(evs []ledger.Event, _ []ledger.Seq) ([]ledger.Event, []ledger.Seq) {
				return evs, []ledger.Seq{8, 9}
			},
			ready: Ready{
				HWM: 5,
				Changes: []Change{
					{Path: "data/m/a/d/1/raw", Op: OpIndex, Old: fileOf("a2"), New: fileOf("a3"), Seq: 8},
					{Path: "data/m/c/d/1/raw", Op: OpIndex, New: fileOf("c1"), Seq: 9},
				},
				Marks: map[string]Mark{"data--m--a": {3, 8}, "data--m--c": {1, 9}},
			},
		},
		{
			name:    "seqs missing",
			edit:    func(evs []ledger.Event, seqs []ledger.Seq) ([]ledger.Event, []ledger.Seq) { return evs, seqs[:1] },
			wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5},
		},
		{
			name:    "only some parts",
			edit:    func(evs []ledger.Event, seqs []ledger.Seq) ([]ledger.Event, []ledger.Seq) { return evs[:1], seqs[:1] },
			wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5},
		},
		{
			name: "parts out of order",
			edit: func(evs []ledger.Event, seqs []ledger.Seq) ([]ledger.Event, []ledger.Seq) {
				return []ledger.Event{evs[1], evs[0]}, seqs
			},
			wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5},
		},
		{
			name: "seqs not increasing",
			edit: func(evs []ledger.Event, _ []ledger.Seq) ([]ledger.Event, []ledger.Seq) {
				return evs, []ledger.Seq{7, 6}
			},
			wantErr: ledger.ErrInvalid, ready: Ready{HWM: 5},
		},
		{
			name: "the second part breaks the chain: nothing staged",
			edit: func(evs []ledger.Event, seqs []ledger.Seq) ([]ledger.Event, []ledger.Seq) {
				evs[1].ModelSeq, evs[1].Prev = 3, 4
				return evs, seqs
			},
			wantErr: ErrGap, ready: Ready{HWM: 5},
		},
		{
			name: "already read by a sync: skipped",
			edit: func(evs []ledger.Event, _ []ledger.Seq) ([]ledger.Event, []ledger.Seq) {
				e := rec("a", 5, 2, 1, "a2").Event
				e.Commit = evs[0].Commit
				return []ledger.Event{e}, []ledger.Seq{5}
			},
			ready: Ready{HWM: 5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, baseState(), Config{Lazy: true}) // own files are in the cache: never lazy
			evs, seqs := two()
			if tc.edit != nil {
				evs, seqs = tc.edit(evs, seqs)
			}
			fences := make([]ledger.Fence, tc.fences)
			for i := range fences {
				fences[i] = ledger.Fence{Lock: fmt.Sprint("lock", i), Seq: 1}
			}
			err := c.RecordOwn(evs, seqs, fences...)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("RecordOwn error %v, want %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.ready, c.mustReady(), cmpReady, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Ready (-want +got):\n%s", d)
			}
		})
	}
}

func TestReadyAdvanceProtocol(t *testing.T) {
	c := newCore(t, baseState(), Config{})
	if c.HasReady() {
		t.Fatal("HasReady on a fresh core")
	}
	if _, err := c.Step(Full, rec("a", 6, 3, 5, "a3")); err != nil {
		t.Fatal(err)
	}
	rd := c.mustReady()
	if d := cmp.Diff(rd, c.mustReady(), cmpReady); d != "" {
		t.Errorf("second Ready differs:\n%s", d)
	}
	// The returned Ready is the caller's: changing it changes nothing inside.
	rd.Changes[0].New.Size = 999
	rd.Marks["data--m--a"] = Mark{}

	for name, err := range map[string]error{
		"Step":         func() error { _, err := c.Step(Full, rec("b", 7, 2, 3, "b2")); return err }(),
		"RecordOwn":    c.RecordOwn([]ledger.Event{rec("b", 7, 2, 3, "b2").Event}, []ledger.Seq{7}),
		"Hydrate":      c.Hydrate("data/m/a/d/1/raw"),
		"AdoptLineage": c.AdoptLineage(ledger.Info{UUID: testLedger, Format: ledger.FormatVersion}),
		"CommitEvents": func() error {
			_, err := c.CommitEvents(ledger.Commit{ID: commitID(1), Host: "h", At: testTime, Entries: []ledger.Entry{fileEntry("data/m/a/d/1/raw", "x")}})
			return err
		}(),
	} {
		if !errors.Is(err, ErrReadyOutstanding) {
			t.Errorf("%s with a Ready outstanding: %v, want ErrReadyOutstanding", name, err)
		}
	}
	mustPanic(t, "Advance of a foreign Ready", func() { c.Advance(Ready{}) })
	c.persistAdvance(rd)
	want := baseState()
	want.HWM = 6
	want.Marks["data--m--a"] = Mark{3, 6}
	want.Files["data/m/a/d/1/raw"] = *fileOf("a3")
	if d := cmp.Diff(want, c.mustState()); d != "" {
		t.Errorf("state after Advance (-want +got):\n%s", d)
	}
	mustPanic(t, "second Advance of the same Ready", func() { c.Advance(rd) })
	// Discard drops staged work and the outstanding Ready.
	if _, err := c.Step(Full, rec("a", 7, 4, 6, "a4")); err != nil {
		t.Fatal(err)
	}
	stale := c.mustReady()
	c.Discard()
	if c.HasReady() {
		t.Error("HasReady after Discard")
	}
	mustPanic(t, "Advance of a discarded Ready", func() { c.Advance(stale) })
	if d := cmp.Diff(want, c.mustState()); d != "" {
		t.Errorf("state after Discard (-want +got):\n%s", d)
	}
}

// mustPanic fails the test unless f panics: a shell's misuse of the core.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestNewValidatesState(t *testing.T) {
	for name, st := range map[string]State{
		"data without a ledger":  {HWM: 3},
		"marks without a ledger": {Marks: map[string]Mark{"p": {1, 1}}},
		"bad uuid":               {Ledger: "nope"},
		"mark without seq":       {Ledger: testLedger, Marks: map[string]Mark{"p": {1, 0}}},
		"mark beyond its seq":    {Ledger: testLedger, Marks: map[string]Mark{"p": {3, 2}}},
		"unsafe path":            {Ledger: testLedger, Files: map[string]File{"../x": {}}},
		"negative size":          {Ledger: testLedger, Files: map[string]File{"x": {Size: -1}}},
	} {
		if _, err := newCoreOf(st, Config{}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	st := baseState()
	c := newCore(t, st, Config{})
	st.Marks["data--m--a"] = Mark{9, 9} // New copies: the caller's maps are not shared
	if c.mustMark("data--m--a") != (Mark{2, 5}) {
		t.Error("New shares the caller's maps")
	}
}

func TestCommitEvents(t *testing.T) {
	marks := map[string]Mark{"data--m--a": {2, 5}}
	cm := ledger.Commit{ID: commitID(1), Host: "h", At: testTime, Message: "m", Entries: []ledger.Entry{
		fileEntry("data/m/c/d/1/raw", "c1"),
		fileEntry("data/m/a/d/1/raw", "a3"),
		del("data/m/a/d/1/metadata.yaml"),
	}}
	got, err := CommitEvents(testLedger, func(p string) Mark { return marks[p] }, cm)
	if err != nil {
		t.Fatal(err)
	}
	base := ledger.Event{V: ledger.FormatVersion, Ledger: testLedger, Commit: commitID(1), Host: "h", At: testTime, Message: "m", Parts: 2}
	a, c := base, base
	a.Partition, a.ModelSeq, a.Prev, a.Part = "data--m--a", 3, 5, 1
	a.Entries = []ledger.Entry{del("data/m/a/d/1/metadata.yaml"), fileEntry("data/m/a/d/1/raw", "a3")}
	c.Partition, c.ModelSeq, c.Prev, c.Part = "data--m--c", 1, 0, 2
	c.Entries = []ledger.Entry{fileEntry("data/m/c/d/1/raw", "c1")}
	if d := cmp.Diff([]ledger.Event{a, c}, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	var many []ledger.Entry
	for i := range ledger.MaxBatch + 1 {
		many = append(many, fileEntry(fmt.Sprintf("data/m/p%d/d/1/raw", i), "x"))
	}
	cm.Entries = many
	if _, err := CommitEvents(testLedger, func(string) Mark { return Mark{} }, cm); !errors.Is(err, ledger.ErrTooLarge) {
		t.Errorf("%d partitions: %v, want ErrTooLarge", len(many), err)
	}
	cm.Entries = []ledger.Entry{fileEntry("data/m/a/d/1/raw", "x"), fileEntry("data/m/a/d/1/raw", "y")}
	if _, err := CommitEvents(testLedger, func(string) Mark { return Mark{} }, cm); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("duplicate path: %v, want ErrInvalid", err)
	}
	cm.Entries = nil
	if _, err := CommitEvents(testLedger, func(string) Mark { return Mark{} }, cm); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("no entries: %v, want ErrInvalid", err)
	}
}

func TestTouchedAndConflicts(t *testing.T) {
	r1 := rec("a", 6, 3, 5, "a3")
	r1.Event.Entries = append(r1.Event.Entries, del("data/m/a/d/1/metadata.yaml"))
	r2 := rec("a", 7, 4, 6, "a4")
	r3 := rec("b", 8, 2, 3, "b2")
	if d := cmp.Diff([]string{"data/m/a/d/1/metadata.yaml", "data/m/a/d/1/raw", "data/m/b/d/1/raw"}, Touched(r3, r1, r2)); d != "" {
		t.Errorf("Touched (-want +got):\n%s", d)
	}
	local := []ledger.Entry{
		fileEntry("data/m/a/d/1/raw", "a9"), // remote ends at a4: conflict
		del("data/m/a/d/1/metadata.yaml"),   // remote deleted it too: no conflict
		fileEntry("data/m/b/d/1/raw", "b2"), // same content: no conflict
		fileEntry("data/m/c/d/1/raw", "c1"), // untouched remotely
	}
	if d := cmp.Diff([]string{"data/m/a/d/1/raw"}, Conflicts(local, []ledger.Record{r2, r3, r1})); d != "" {
		t.Errorf("Conflicts (-want +got):\n%s", d)
	}
	// A local file holding what an earlier record committed (a3, changed to a4
	// since) is committed content, not a conflict: a host's own commit whose
	// outcome it never learned. Records in any order.
	local[0] = fileEntry("data/m/a/d/1/raw", "a3")
	if got := Conflicts(local, []ledger.Record{r2, r3, r1}); len(got) != 0 {
		t.Errorf("Conflicts with an earlier committed version: %q, want none", got)
	}
}
