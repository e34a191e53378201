package maintain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/snapshot"
)

// GCOptions configure GC.
type GCOptions struct {
	// Grace protects blobs stored less than this long ago: a commit in flight
	// uploads its blobs before it publishes its events.
	Grace time.Duration
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Parallel bounds concurrent deletions; 0 means 16.
	Parallel int
}

// GCResult says what GC found and did.
type GCResult struct {
	DryRun     bool       `json:"dryRun"`
	Head       ledger.Seq `json:"head"`       // the log's last seq when GC read it
	Floor      ledger.Seq `json:"floor"`      // events from here to Head were read for references
	Snapshot   ledger.Seq `json:"snapshot"`   // the newest intact snapshot's seq (0: none)
	Snapshots  int        `json:"snapshots"`  // intact usable snapshots whose files were kept
	Blobs      int        `json:"blobs"`      // blobs listed
	Referenced int        `json:"referenced"` // of them, referenced by a snapshot or an event
	Young      int        `json:"young"`      // of the rest, kept for the grace period
	Deleted    []string   `json:"deleted"`    // digests deleted (or that would be)
	Bytes      int64      `json:"bytes"`      // their size
	// DeletedSnapshots are snapshots no rebuild can use any more (the log lacks
	// the events after them) or that do not read back, deleted (or that would be).
	DeletedSnapshots []string `json:"deletedSnapshots"`
}

// ErrDangling: an event published while GC ran references a blob GC deleted (a
// commit reused a blob that was unreferenced and older than the grace period).
var ErrDangling = errors.New("event references a deleted blob")

// GC deletes the blobs no live host, rebuild or replay from a usable snapshot
// can need. A blob is kept when it is
//
//   - referenced by an intact usable snapshot (one the log holds every later
//     event of: a rebuild may start from any of them, not just the newest, in
//     case the newest goes bad);
//   - referenced by an event the log still holds from the floor on (see snapshot.Floor),
//     directly, as a manifest, or by a manifest's entries: a host whose HWM is
//     behind the newest snapshot still syncs through those events and fetches
//     what they wrote, even content a later event overwrote;
//   - or stored less than Grace ago.
//
// So blobs become garbage once Retain has dropped the events referencing them
// and the snapshots no longer hold them, or when an upload was never published.
// Snapshots no rebuild can use any more are deleted too, never the newest
// intact one. Blobs are listed before the log is read, so a blob uploaded for an
// event published meanwhile is either young or not listed at all.
//
// A commit may also reuse a blob GC found garbage (a file set back to content
// nothing references any more). Put stores such a blob again once it is older
// than ledger.BlobRefreshAge, which makes it young, and GC looks at each blob
// once more just before deleting it, keeping one stored again since the
// listing. Both hold only if Grace exceeds BlobRefreshAge plus the longest
// commit (the CLI requires at least 2 h unless told otherwise).
//
// GC refuses to run (deletes nothing) when a usable snapshot is needed and none
// reads back, or when the log cannot be read from the floor. After deleting it
// reads the events published meanwhile: if one references a deleted blob (a
// grace shorter than the above allows it) the error wraps ErrDangling and names
// it (commit the file again, or restore the blob from a host's cache).
func GC(ctx context.Context, cfg snapshot.Config, opt GCOptions) (GCResult, error) {
	res := GCResult{DryRun: opt.DryRun, Deleted: []string{}, DeletedSnapshots: []string{}}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 16
	}
	lg := cfg.Logs()
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("gc: read ledger info: %w", err)
	}
	// 1. The candidates: every blob, listed before anything is read.
	blobs := map[ledger.Digest]ledger.ObjectInfo{}
	if err := cfg.Blobs.List(ctx, func(d ledger.Digest, oi ledger.ObjectInfo) error { blobs[d] = oi; return nil }); err != nil {
		return res, fmt.Errorf("gc: list blobs: %w", err)
	}
	res.Blobs = len(blobs)
	cutoff := opt.Now().Add(-opt.Grace)

	// 2. The roots: usable snapshots, then the events from the floor.
	b, floor, err := snapshot.Floor(ctx, cfg.Log)
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	res.Head, res.Floor = b.Last, floor
	refs := map[ledger.Digest]bool{}
	// Only snapshots the log attests root anything (snapshot.Get refuses the
	// others): a snapshot's word alone, which any role that writes blobs could
	// have stored, never lets a blob go.
	infos, err := snapshot.ListAttested(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	var drop []snapshot.Info
	for _, si := range infos {
		if si.Seq+1 < floor && res.Snapshot != 0 {
			drop = append(drop, si) // older than the log: no rebuild can use it
			continue
		}
		s, err := snapshot.Get(ctx, cfg.Objects, si)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			lg.Warn("snapshot not attested or does not read back", "key", si.Key, "err", err)
			if si.ModTime.Before(cutoff) {
				drop = append(drop, si)
			}
			continue
		}
		if res.Snapshot == 0 {
			res.Snapshot = s.Seq
		}
		if si.Seq+1 < floor {
			continue // the newest intact one is never dropped, but it roots nothing a rebuild can use
		}
		res.Snapshots++
		for _, e := range s.Entries {
			refs[e.SHA256] = true
		}
	}
	if floor > 1 && res.Snapshots == 0 {
		return res, fmt.Errorf("gc: the log lacks seqs below %d and no usable snapshot reads back: refusing to collect: %w", floor, ledger.ErrNotFound)
	}
	if b.Last >= floor {
		if err := references(ctx, cfg, floor, b.Last, refs); err != nil {
			return res, fmt.Errorf("gc: %w", err)
		}
	}

	// 3. The garbage: neither referenced nor young.
	var garbage []ledger.Digest
	for d, oi := range blobs {
		switch {
		case refs[d]:
			res.Referenced++
		case !oi.ModTime.Before(cutoff):
			res.Young++
		default:
			garbage = append(garbage, d)
			res.Bytes += oi.Size
		}
	}
	slices.SortFunc(garbage, func(a, b ledger.Digest) int { return bytes.Compare(a[:], b[:]) })
	for _, d := range garbage {
		res.Deleted = append(res.Deleted, d.String())
	}
	for _, si := range drop {
		res.DeletedSnapshots = append(res.DeletedSnapshots, si.Key)
	}
	if opt.DryRun {
		return res, nil
	}
	kept, err := deleteAll(ctx, cfg, garbage, cutoff, opt.Parallel)
	if len(kept) > 0 {
		// Stored again since the listing: a commit reusing their content.
		lg.Info("gc: blobs stored again since the listing kept", "blobs", len(kept))
		garbage = slices.DeleteFunc(garbage, func(d ledger.Digest) bool { return kept[d] })
		res.Deleted = res.Deleted[:0]
		for _, d := range garbage {
			res.Deleted = append(res.Deleted, d.String())
		}
		for d := range kept {
			res.Young++
			res.Bytes -= blobs[d].Size
		}
	}
	if err != nil {
		return res, fmt.Errorf("gc: %w", err)
	}
	for _, si := range drop {
		if err := snapshot.Delete(ctx, cfg.Objects, si); err != nil {
			return res, fmt.Errorf("gc: %w", err)
		}
	}
	lg.Info("gc done", "deleted", len(garbage), "bytes", res.Bytes, "snapshots", len(drop))

	// 4. The race a grace period cannot cover: a commit that found a garbage blob
	// present (content addressing skips the upload) and published meanwhile.
	if len(garbage) > 0 {
		if err := recheck(ctx, cfg, b.Last, garbage); err != nil {
			return res, fmt.Errorf("gc: %w", err)
		}
	}
	return res, nil
}

// references adds to refs every blob the events from..to reference: entries'
// content, manifests and the manifests' entries.
func references(ctx context.Context, cfg snapshot.Config, from, to ledger.Seq, refs map[ledger.Digest]bool) error {
	return cfg.Log.Read(ctx, from, to, func(rec ledger.Record) error {
		ev := rec.Event
		if !ev.Manifest.IsZero() {
			refs[ev.Manifest] = true
			if len(ev.Entries) == 0 {
				m, err := ledger.ReadBlob(ctx, cfg.Blobs, ev.Manifest)
				if err != nil {
					return fmt.Errorf("read manifest of seq %d: %w", rec.Seq, err)
				}
				if ev.Entries, err = ledger.DecodeManifest(m, ev.Partition); err != nil {
					return fmt.Errorf("manifest of seq %d: %w", rec.Seq, err)
				}
			}
		}
		for _, e := range ev.Entries {
			if !e.Deleted {
				refs[e.SHA256] = true
			}
		}
		return nil
	})
}

// deleteAll deletes the blobs ds, each after a last look at it: one stored
// again since the listing (not older than cutoff any more) is kept, and
// returned in kept. That leaves a window of one request per blob (between its
// stat and its delete) for a commit to find it present, which the Put side
// closes: Put stores again a blob older than ledger.BlobRefreshAge instead of
// taking it as is, and GC's grace exceeds that age.
func deleteAll(ctx context.Context, cfg snapshot.Config, ds []ledger.Digest, cutoff time.Time, parallel int) (kept map[ledger.Digest]bool, err error) {
	var (
		g  errgroup.Group // one failed delete does not stop the others
		mu sync.Mutex     // kept
	)
	g.SetLimit(parallel)
	kept = map[ledger.Digest]bool{}
	for _, d := range ds {
		g.Go(func() error {
			info, err := cfg.Blobs.Stat(ctx, d)
			switch {
			case errors.Is(err, ledger.ErrNotFound):
				return nil // gone already
			case err == nil && !info.ModTime.Before(cutoff):
				mu.Lock()
				kept[d] = true
				mu.Unlock()
				return nil
			case err == nil:
				err = cfg.Blobs.Delete(ctx, d)
			}
			return err
		})
	}
	return kept, g.Wait()
}

// recheck reads the events published after head and fails if one references a
// deleted blob.
func recheck(ctx context.Context, cfg snapshot.Config, head ledger.Seq, deleted []ledger.Digest) error {
	last, err := cfg.Log.LastSeq(ctx)
	if err != nil || last <= head {
		return err
	}
	gone := make(map[ledger.Digest]bool, len(deleted))
	for _, d := range deleted {
		gone[d] = true
	}
	refs := map[ledger.Digest]bool{}
	if err := references(ctx, cfg, head+1, last, refs); err != nil {
		return fmt.Errorf("recheck events %d..%d: %w", head+1, last, err)
	}
	var hit []string
	for d := range refs {
		if gone[d] {
			hit = append(hit, d.String())
		}
	}
	if len(hit) > 0 {
		slices.Sort(hit)
		return fmt.Errorf("events %d..%d published during gc reference deleted blobs %v: %w", head+1, last, hit, ErrDangling)
	}
	return nil
}

// Referenced lists what the ledger as of seq to references in its blob
// store — what a rebuild, a replay or a host behind may fetch: the blobs of
// the attested snapshots a rebuild may use (and their keys), and of the events
// the log holds from its floor to to (content, manifests, the manifests'
// entries). GC keeps them; a backup of a ledger whose blobs are outside NATS
// lists them, for a restore to check they are still there.
func Referenced(ctx context.Context, cfg snapshot.Config, to ledger.Seq) (blobs []ledger.Digest, snapshots []string, err error) {
	if err := cfg.Check(); err != nil {
		return nil, nil, err
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read ledger info: %w", err)
	}
	_, floor, err := snapshot.Floor(ctx, cfg.Log)
	if err != nil {
		return nil, nil, err
	}
	refs := map[ledger.Digest]bool{}
	infos, err := snapshot.ListAttested(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return nil, nil, err
	}
	for _, si := range infos {
		if si.Seq > to || !si.Attested {
			continue
		}
		s, err := snapshot.Get(ctx, cfg.Objects, si)
		if err != nil {
			continue // not one a rebuild uses
		}
		snapshots = append(snapshots, si.Key)
		for _, e := range s.Entries {
			refs[e.SHA256] = true
		}
	}
	if to >= floor {
		if err := references(ctx, cfg, floor, to, refs); err != nil {
			return nil, nil, err
		}
	}
	for d := range refs {
		blobs = append(blobs, d)
	}
	slices.SortFunc(blobs, func(a, b ledger.Digest) int { return bytes.Compare(a[:], b[:]) })
	return blobs, snapshots, nil
}
