package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
)

// NoSpaceError: a pull stopped because the cache's disk is full (a write
// failed for lack of space). Everything applied before it is kept (the HWM
// moved to it); nothing of the commits it stopped at is claimed. It says how
// much the rest of the pull writes, so that the space to free is known.
type NoSpaceError struct {
	Dir  string // the cache
	Free uint64 // bytes free on its filesystem now (0: unknown, or none)
	// Need is the bytes of the files the rest of the pull brings (each
	// path's last version from seq From to To; 0 when unknown), in Files
	// files: at most what it writes (some may be written already, by the
	// pull that stopped), at least what a cache holding none of them needs.
	Need     int64
	Files    int
	From, To ledger.Seq
	Err      error
}

func (e *NoSpaceError) Error() string {
	if e.Files == 0 {
		return fmt.Sprintf("the cache's disk is full (%s has %s free): %v", e.Dir, ledger.Bytes(e.Free), e.Err)
	}
	return fmt.Sprintf("the cache's disk is full (%s has %s free; the rest of this pull, seqs %d..%d, is %s in %d files): %v",
		e.Dir, ledger.Bytes(e.Free), e.From, e.To, ledger.Bytes(uint64(e.Need)), e.Files, e.Err)
}

func (e *NoSpaceError) Unwrap() error { return e.Err }

// Short returns how many more bytes than are free the rest of the pull may
// need (0 when its size is unknown or the space is there).
func (e *NoSpaceError) Short() uint64 {
	if e.Need <= 0 || uint64(e.Need) <= e.Free {
		return 0
	}
	return uint64(e.Need) - e.Free
}

// noSpace returns err as a *NoSpaceError when it is a write that failed for
// lack of space in a pull of seqs from..to (from > to: not a read of the log,
// a hydration), with what the rest of the pull writes.
func (h *Host) noSpace(ctx context.Context, err error, from, to ledger.Seq, lazy bool) error {
	var ns *NoSpaceError
	if err == nil || !fsx.NoSpace(err) || errors.As(err, &ns) {
		return err
	}
	e := &NoSpaceError{Dir: h.cfg.Cache, From: from, To: to, Err: err}
	if free, _, _, serr := fsx.DiskSpace(h.cfg.Cache); serr == nil {
		e.Free = free
	}
	if from <= to && ctx.Err() == nil {
		if need, files, nerr := h.pullNeed(ctx, from, to, lazy); nerr == nil {
			e.Need, e.Files = need, files
		} else {
			h.log.Warn("cannot tell what the rest of the pull writes", "err", nerr)
		}
	}
	return e
}

// pullNeed reads the log from from to to (events and manifests, no file
// content) and returns the bytes and the number of the files a pull of it
// writes: each path's last version, deleted paths and lazy ones (a lazy pull
// of swamp's raw data) left out.
func (h *Host) pullNeed(ctx context.Context, from, to ledger.Seq, lazy bool) (int64, int, error) {
	last := map[string]int64{}
	err := h.logPort().Read(ctx, from, to, func(rec ledger.Record) error {
		es := rec.Event.Entries
		if !rec.Event.Manifest.IsZero() && len(es) == 0 {
			b, err := ledger.ReadBlob(ctx, h.blobsPort(), rec.Event.Manifest)
			if err != nil {
				return fmt.Errorf("read manifest of seq %d: %w", rec.Seq, err)
			}
			if es, err = ledger.DecodeManifest(b, rec.Event.Partition); err != nil {
				return fmt.Errorf("manifest of seq %d: %w", rec.Seq, err)
			}
		}
		for _, e := range es {
			switch {
			case e.Deleted || lazy && ledger.IsLazySkippable(e.Path):
				delete(last, e.Path)
			default:
				last[e.Path] = e.Size
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	var need int64
	for _, n := range last {
		need += n
	}
	return need, len(last), nil
}
