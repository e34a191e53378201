package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// history is a ledger with a log of real commits, for the tests that check
// what the object store says against the log.
type history struct {
	t    *testing.T
	cfg  Config
	objs *ledger.Bucket
	lg   *memledger.Log
	uuid string
	head map[string]ledger.Record
}

func newHistory(t *testing.T) *history {
	t.Helper()
	lg, err := memledger.New(ledger.Info{Name: "h"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	objsDrv, err := fileblob.New(fileblob.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	objs := ledger.NewBucket(objsDrv, ledger.RetryPolicy{Attempts: 1})
	return &history{t: t, lg: lg, objs: objs, uuid: lg.UUID(), head: map[string]ledger.Record{},
		cfg: Config{Log: lg, Blobs: objs, Objects: objs}}
}

// commit appends a one-file commit writing path.
func (h *history) commit(path string) ledger.Seq {
	h.t.Helper()
	id, _ := ledger.NewCommitID(rand.Reader)
	p := ledger.PartitionKey(path)
	prev := h.head[p]
	ev := ledger.Event{V: ledger.FormatVersion, Ledger: h.uuid, Commit: id, Host: "h", At: time.Now(), Partition: p,
		ModelSeq: prev.Event.ModelSeq + 1, Prev: prev.Seq, Parts: 1, Part: 1,
		Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path + id)), Size: 1, Mode: 0o644}}}
	seqs, err := h.lg.Append(context.Background(), []ledger.Event{ev})
	if err != nil {
		h.t.Fatal(err)
	}
	h.head[p] = ledger.Record{Seq: seqs[0], Event: ev}
	return seqs[0]
}

// commits appends n commits over a few partitions, and returns the last seq.
func (h *history) commits(n int) ledger.Seq {
	var last ledger.Seq
	for i := range n {
		last = h.commit(fmt.Sprintf("data/t/m%d/f", i%3))
	}
	return last
}

// store writes s unattested, as a release before attestations (or anyone who
// writes blobs) does.
func (h *history) store(s *Snapshot) {
	h.t.Helper()
	b := encode(h.t, s)
	if err := h.objs.PutObject(context.Background(), Key(h.uuid, s.Seq), bytes.NewReader(b), int64(len(b))); err != nil {
		h.t.Fatal(err)
	}
}

// build returns the state the log gives at seq.
func (h *history) build(seq ledger.Seq) *Snapshot {
	h.t.Helper()
	s, err := Build(context.Background(), BuildConfig{Log: h.lg, Blobs: h.cfg.Blobs, To: seq})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *history) retentionJSON(before ledger.Seq) {
	h.t.Helper()
	b := fmt.Appendf(nil, `{"v":1,"ledger":"%s","before":%d}`, h.uuid, before)
	if err := h.objs.PutObject(context.Background(), retentionKey(h.uuid), bytes.NewReader(b), int64(len(b))); err != nil {
		h.t.Fatal(err)
	}
}

// adopted returns the keys Adopt attested and the ones it skipped.
func adopted(res AdoptResult) (ok, skipped []string) {
	for _, a := range res.Adopted {
		ok = append(ok, fmt.Sprintf("%d verified=%v", a.Seq, a.Verified))
	}
	for _, s := range res.Skipped {
		skipped = append(skipped, s.Key[strings.LastIndex(s.Key, "/")+1:])
	}
	return ok, skipped
}

// TestAdoptPlantedOnAttestingLedger is issue 38's point 8 from the attacker's
// side: on a ledger that attests (its admin took a snapshot), a host credential
// stores snapshots of its own. Adopt attests neither the one the log
// contradicts nor the one it can no longer check; it does attest an honest
// snapshot whose attestation failed (the log verifies it); and rebuild's error
// names no adopt.
func TestAdoptPlantedOnAttestingLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	h.commits(10)
	if _, err := Take(ctx, h.cfg, TakeOptions{}); err != nil { // attested at 10
		t.Fatal(err)
	}
	h.commits(10)
	// Planted at 15: the log's state there, less a file (a host that wants
	// fresh hosts to lose it).
	planted := h.build(15)
	planted.Entries = planted.Entries[1:]
	h.store(planted)
	// Honest, unattested: a host ran `snapshot` (stored, attestation refused).
	h.store(h.build(20))
	res, err := Adopt(ctx, h.cfg, AdoptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok, skipped := adopted(res)
	if res.Legacy || fmt.Sprint(ok) != "[20 verified=true]" || len(skipped) != 1 || !strings.Contains(res.Skipped[0].Why, "contradicts") {
		t.Fatalf("Adopt on an attesting ledger: legacy %v, adopted %v, skipped %+v", res.Legacy, ok, res.Skipped)
	}

	// Retention then drops the events below 21: a snapshot planted at 18 can
	// no longer be checked, and is not adopted unless named.
	late := h.build(18)
	late.Entries = late.Entries[1:]
	if _, err := h.lg.TruncateBefore(ctx, 21); err != nil {
		t.Fatal(err)
	}
	if err := h.lg.AttestRetention(ctx, 21); err != nil {
		t.Fatal(err)
	}
	h.commits(5)
	h.store(late)
	res, err = Adopt(ctx, h.cfg, AdoptOptions{})
	if ok, skipped := adopted(res); err != nil || len(ok) != 0 || len(skipped) != 2 || !strings.Contains(res.Skipped[1].Why, "attests its snapshots") {
		t.Errorf("Adopt of an unverifiable snapshot on an attesting ledger: %v, %v, %+v", err, ok, res.Skipped)
	}
	// A name that is not there is an error, not a silent no-op.
	if _, err := Adopt(ctx, h.cfg, AdoptOptions{Seqs: []ledger.Seq{999}}); !errors.Is(err, ErrNoSuchSnapshot) {
		t.Errorf("Adopt of a seq with no snapshot = %v, want ErrNoSuchSnapshot", err)
	}
}

// TestAdoptRetentionChecked is issue 38's point 7 from the attacker's side: on
// a ledger made by a release before attestations, a host writes
// retention.json. A bound above the head, or one below which the log still
// holds every event, or one no adopted snapshot covers, is not adopted; the
// release's real bound is.
func TestAdoptRetentionChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		bound func(head ledger.Seq) ledger.Seq
		trunc bool
		want  string // the reason's words; "" adopted
	}{
		{"far above the head", func(head ledger.Seq) ledger.Seq { return 1 << 40 }, true, "above the log's head"},
		{"head + 2", func(head ledger.Seq) ledger.Seq { return head + 2 }, true, "above the log's head"},
		{"nothing dropped", func(head ledger.Seq) ledger.Seq { return 8 }, false, "still holds every event"},
		{"above the newest snapshot", func(head ledger.Seq) ledger.Seq { return head }, true, "no attested snapshot"},
		{"the release's own", func(head ledger.Seq) ledger.Seq { return 9 }, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHistory(t)
			h.commits(10)
			h.store(h.build(10)) // the older release's snapshot
			head := h.commits(5)
			if tc.trunc {
				if _, err := h.lg.TruncateBefore(ctx, 9); err != nil {
					t.Fatal(err)
				}
			}
			h.retentionJSON(tc.bound(head))
			res, err := Adopt(ctx, h.cfg, AdoptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := h.lg.Attested(ctx)
			switch {
			case tc.want == "" && (res.Retained != 9 || a.Retained != 9):
				t.Errorf("the release's bound not adopted: %+v (attested %d)", res, a.Retained)
			case tc.want != "" && (res.Retained != 0 || a.Retained != 0 || !strings.Contains(res.RetentionSkipped, tc.want)):
				t.Errorf("bound %d: adopted %d (attested %d), skipped %q; want it refused for %q", tc.bound(head), res.Retained, a.Retained, res.RetentionSkipped, tc.want)
			}
			// Whatever was planted, a snapshot can still be taken.
			if _, err := Take(ctx, h.cfg, TakeOptions{}); err != nil {
				t.Errorf("take after adopt: %v", err)
			}
		})
	}
}

// TestFloorIgnoresBoundAboveHead: a bound an older release's adopt attested
// far above the head (issue 38 point 7) does not wedge anything: readers take
// the log's first seq, and snapshot and rebuild work.
func TestFloorIgnoresBoundAboveHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	head := h.commits(6)
	if _, err := Take(ctx, h.cfg, TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.lg.AttestRetention(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	if _, floor, err := Floor(ctx, h.lg); err != nil || floor != 1 {
		t.Errorf("Floor with a bound far above head %d = %d, %v; want 1", head, floor, err)
	}
	h.commits(2)
	if _, err := Take(ctx, h.cfg, TakeOptions{}); err != nil {
		t.Errorf("take with a bound above the head: %v", err)
	}
}

// TestSetRetention: the admin's correction of a wrong bound. A bound the log
// contradicts (above the head, or below a seq it no longer holds) is refused
// naming the seq to go above; a right one is set, lower or higher, and a
// snapshot wedged by the wrong one can be taken again.
func TestSetRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHistory(t)
	h.commit("data/t/once/f") // a partition written once: its head stays at seq 1
	h.commits(9)
	if _, err := Take(ctx, h.cfg, TakeOptions{}); err != nil {
		t.Fatal(err)
	}
	h.commits(5) // head 15
	// A wrong bound, as an older release's adopt attested one (nothing was
	// dropped): no snapshot at or above 14, so nothing can be taken.
	if err := h.lg.AttestRetention(ctx, 15); err != nil {
		t.Fatal(err)
	}
	var wb *WrongBoundError
	if _, err := Take(ctx, h.cfg, TakeOptions{}); !errors.Is(err, ledger.ErrTruncated) || !errors.As(err, &wb) || wb.Bound != 15 {
		t.Fatalf("take under a wrong bound: %v, want ErrTruncated (the wedge) naming the wrong bound 15", err)
	}
	if _, err := SetRetention(ctx, h.lg, 17); !errors.Is(err, ErrBadBound) {
		t.Errorf("SetRetention above the head: %v, want ErrBadBound", err)
	}
	if res, err := SetRetention(ctx, h.lg, 0); err != nil || res.Was != 15 || res.Now != 0 {
		t.Fatalf("SetRetention(0) = %+v, %v", res, err)
	}
	if _, err := Take(ctx, h.cfg, TakeOptions{}); err != nil {
		t.Errorf("take after the correction: %v", err)
	}
	// Events really dropped below 12 (partition heads kept): a bound below the
	// highest dropped seq is refused, naming it.
	if _, err := h.lg.TruncateBefore(ctx, 12); err != nil {
		t.Fatal(err)
	}
	_, err := SetRetention(ctx, h.lg, 1)
	if !errors.Is(err, ErrBadBound) || !strings.Contains(err.Error(), "no longer holds seq") {
		t.Fatalf("SetRetention below dropped events: %v", err)
	}
	if _, err := SetRetention(ctx, h.lg, 12); err != nil {
		t.Errorf("SetRetention(12) after truncating below 12: %v", err)
	}
	if _, floor, _ := Floor(ctx, h.lg); floor != 12 {
		t.Errorf("floor %d, want 12", floor)
	}
}
