package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// AdoptOptions select what Adopt attests.
type AdoptOptions struct {
	// Seqs names the snapshots to adopt: the admin's word for each, once the
	// log does not contradict it. Empty: every unattested snapshot the log
	// verifies, and on a ledger that never attested anything, what a release
	// before attestations left (Adopt).
	Seqs []ledger.Seq
}

// Adopted is one snapshot Adopt attested.
type Adopted struct {
	Info
	// Verified: the log still holds the events up to it, and replaying them
	// gives this snapshot. Otherwise it was adopted on the object store's word
	// (a ledger that never attested) or the admin's (named).
	Verified bool `json:"verified"`
}

// Skip is an object Adopt left unattested, and why.
type Skip struct {
	Key string `json:"key"`
	Why string `json:"why"`
}

// AdoptResult says what Adopt attested.
type AdoptResult struct {
	Adopted []Adopted `json:"adopted"` // snapshots now attested
	Skipped []Skip    `json:"skipped"` // snapshots left unattested
	// Legacy: the ledger attested nothing before (a release before
	// attestations made it, and this one took no snapshot and ran no
	// retention on it yet).
	Legacy   bool       `json:"legacy"`
	Retained ledger.Seq `json:"retained"` // the retention bound now attested (0: none adopted)
	// RetentionSkipped says why the bound recorded beside the snapshots was
	// not adopted ("": there was none, or it was).
	RetentionSkipped string `json:"retentionSkipped,omitempty"`
}

// ErrNoSuchSnapshot: a snapshot named to Adopt is not in the object store.
var ErrNoSuchSnapshot = errors.New("no such snapshot")

// Adopt has the log attest snapshots the object store holds that it does not
// attest (only the admin may: ledger.ErrPermission otherwise). The object
// store is no authority on them (any role that writes blobs may write there,
// ledger.Attestations), so Adopt attests a snapshot only when
//
//   - the log verifies it: it still holds the events from an attested
//     snapshot below it (or from seq 1) up to it, and replaying them (Build)
//     gives the same index and marks — what `syncledger snapshot` would have
//     written, whoever stored it; or
//   - the log cannot verify it (the events are gone) and either the ledger
//     never attested anything (a release before attestations made it: its
//     snapshots were trusted on the store's word, and this is the one-time
//     upgrade), or the admin names it in opt.Seqs.
//
// A snapshot the log contradicts (the replay differs: planted or damaged), one
// above the log's head, or one that does not read back is never attested. On
// a ledger that never attested, the retention bound that release recorded
// beside the snapshots (snapshots/<uuid>/retention.json) is adopted too, once
// the log does not contradict it (CheckRetention), something below it is
// really gone, and a snapshot it leaves usable is attested — so that it can
// neither send readers to events the log lacks nor leave no snapshot usable.
func Adopt(ctx context.Context, cfg Config, opt AdoptOptions) (AdoptResult, error) {
	res := AdoptResult{Adopted: []Adopted{}, Skipped: []Skip{}}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: read ledger info: %w", err)
	}
	a, err := attested(ctx, cfg.Log)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: %w", err)
	}
	res.Legacy = len(a.Snapshots) == 0 && a.Retained == 0
	b, err := cfg.Log.Bounds(ctx)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: read log bounds: %w", err)
	}
	infos, err := ListAttested(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: %w", err)
	}
	slices.Reverse(infos) // oldest first: the newest are kept (ledger.MaxAttested), and each verifies the next
	named := len(opt.Seqs) > 0
	want := func(si Info) bool { return !si.Attested && (!named || slices.Contains(opt.Seqs, si.Seq)) }
	for _, seq := range opt.Seqs {
		if !slices.ContainsFunc(infos, func(si Info) bool { return si.Seq == seq }) {
			return res, fmt.Errorf("adopt snapshots: %s: %w (snapshot --list lists them)", Key(info.UUID, seq), ErrNoSuchSnapshot)
		}
	}
	v := verifier{cfg: cfg, infos: infos}
	for i, si := range infos {
		if !want(si) {
			if named && slices.Contains(opt.Seqs, si.Seq) {
				res.Skipped = append(res.Skipped, Skip{si.Key, "attested already"})
			}
			continue
		}
		skip := func(why string) { res.Skipped = append(res.Skipped, Skip{si.Key, why}) }
		if si.Seq > b.Last {
			skip(fmt.Sprintf("above the log's head %d: no release took it of this log", b.Last))
			continue
		}
		bs, err := readAll(ctx, cfg.Objects, si.Key)
		var s *Snapshot
		if err == nil {
			si.SHA256, si.Attested = ledger.DigestOf(bs), true
			s, err = read(bytes.NewReader(bs), si)
		}
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			skip(fmt.Sprintf("does not read back: %v", err))
			continue
		}
		verified, err := v.check(ctx, s)
		switch {
		case err != nil && errors.Is(err, errContradicted):
			skip(err.Error())
			continue
		case err != nil:
			return res, fmt.Errorf("adopt snapshots: verify %s: %w", si.Key, err)
		case !verified && !named && !res.Legacy:
			skip("the log no longer holds the events to verify it, and this ledger attests its snapshots: " +
				"`syncledger snapshot` did not take it; adopt it by name only if you know who wrote it")
			continue
		}
		if err := cfg.Log.AttestSnapshot(ctx, si.Seq, si.SHA256); err != nil {
			return res, fmt.Errorf("adopt snapshots: %w", err)
		}
		infos[i] = si
		v.trusted(s)
		res.Adopted = append(res.Adopted, Adopted{Info: si, Verified: verified})
	}
	if res.Legacy && !named {
		if err := adoptRetention(ctx, cfg, info.UUID, v.newest(), &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// adoptRetention adopts the legacy retention bound of ledger uuid once the log
// does not contradict it; newest is the newest snapshot now attested (0: none).
func adoptRetention(ctx context.Context, cfg Config, uuid string, newest ledger.Seq, res *AdoptResult) error {
	r, err := legacyRetained(ctx, cfg.Objects, uuid)
	switch {
	case errors.Is(err, ledger.ErrInvalid):
		res.RetentionSkipped = err.Error()
		return nil
	case err != nil:
		return fmt.Errorf("adopt snapshots: %w", err)
	case r <= 1:
		return nil
	}
	b, err := cfg.Log.Bounds(ctx)
	if err != nil {
		return fmt.Errorf("adopt snapshots: read log bounds: %w", err)
	}
	if err := CheckRetention(ctx, cfg.Log, r); err != nil {
		if !errors.Is(err, ErrBadBound) {
			return fmt.Errorf("adopt snapshots: %w", err)
		}
		res.RetentionSkipped = err.Error()
		return nil
	}
	if r > newest+1 {
		res.RetentionSkipped = fmt.Sprintf("retention bound %d: no attested snapshot at or above seq %d, so it would leave none usable", r, r-1)
		return nil
	}
	missing, err := firstMissing(ctx, cfg.Log, max(b.First, 1), r-1)
	if err != nil {
		return fmt.Errorf("adopt snapshots: %w", err)
	}
	if b.First < r && missing == 0 {
		res.RetentionSkipped = fmt.Sprintf("retention bound %d: the log still holds every event below it (from seq %d): nothing to attest", r, b.First)
		return nil
	}
	if err := cfg.Log.AttestRetention(ctx, r); err != nil {
		return fmt.Errorf("adopt snapshots: %w", err)
	}
	res.Retained = r
	return nil
}

// errContradicted: the log's replay up to a snapshot's seq differs from it.
var errContradicted = errors.New("the log contradicts it")

// verifier checks snapshots against the log, each from the newest trusted
// snapshot below it (attested and reading back, or adopted in this run).
type verifier struct {
	cfg   Config
	infos []Info // oldest first, as Adopt goes
	done  []*Snapshot
}

func (v *verifier) trusted(s *Snapshot) { v.done = append(v.done, s) }

// newest returns the seq of the newest snapshot attested now.
func (v *verifier) newest() ledger.Seq {
	var n ledger.Seq
	for _, si := range v.infos {
		if si.Attested {
			n = max(n, si.Seq)
		}
	}
	return n
}

// base returns the newest trusted snapshot below seq (nil: none, start from
// seq 0).
func (v *verifier) base(ctx context.Context, seq ledger.Seq) *Snapshot {
	var best *Snapshot
	for _, s := range v.done {
		if s.Seq < seq && (best == nil || s.Seq > best.Seq) {
			best = s
		}
	}
	for i := len(v.infos) - 1; i >= 0; i-- {
		si := v.infos[i]
		if !si.Attested || si.Seq >= seq || best != nil && si.Seq <= best.Seq {
			continue
		}
		if s, err := Get(ctx, v.cfg.Objects, si); err == nil {
			return s
		}
	}
	return best
}

// check replays the log up to s.Seq from the newest trusted snapshot below it
// and compares: true when they agree; false when the log no longer holds the
// events (it cannot tell); an error wrapping errContradicted when they differ.
func (v *verifier) check(ctx context.Context, s *Snapshot) (bool, error) {
	base := v.base(ctx, s.Seq)
	got, err := Build(ctx, BuildConfig{Log: v.cfg.Log, Blobs: v.cfg.Blobs, Base: base, To: s.Seq})
	var re *ledger.RecordError
	switch {
	case errors.Is(err, ledger.ErrTruncated), errors.As(err, &re):
		return false, nil // gone, or a message no reader applies: nothing to compare with
	case err != nil:
		return false, err
	}
	var want, have bytes.Buffer
	if err := Encode(&want, got); err != nil {
		return false, err
	}
	if err := Encode(&have, s); err != nil {
		return false, err
	}
	if got.Seq != s.Seq || !bytes.Equal(want.Bytes(), have.Bytes()) {
		from := ledger.Seq(0)
		if base != nil {
			from = base.Seq
		}
		return false, fmt.Errorf("%w: replaying the log from seq %d to %d gives %d files in %d partitions at seq %d, it holds %d files in %d partitions (planted, or damaged)",
			errContradicted, from, s.Seq, len(got.Entries), len(got.Marks), got.Seq, len(s.Entries), len(s.Marks))
	}
	return true, nil
}

func readAll(ctx context.Context, objs *ledger.Bucket, key string) ([]byte, error) {
	rc, err := objs.GetObject(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
