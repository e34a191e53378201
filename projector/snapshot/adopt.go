package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/syncledger/syncledger/ledger"
)

// AdoptResult says what Adopt attested.
type AdoptResult struct {
	Adopted  []Info     `json:"adopted"`  // snapshots now attested
	Skipped  []string   `json:"skipped"`  // snapshots that do not read back
	Retained ledger.Seq `json:"retained"` // the retention bound now attested (0: none recorded)
}

// Adopt has the log attest what a release that did not attest left in the
// object store: every snapshot of the ledger that reads back intact and is not
// attested yet, and the retention bound recorded beside them
// (snapshots/<uuid>/retention.json). It takes the object store's word, so only
// the admin may (ledger.ErrPermission otherwise), once, on upgrading: before
// then a snapshot was trusted on that word alone, and after it only attested
// ones are. A snapshot that does not read back is left out.
func Adopt(ctx context.Context, cfg Config) (AdoptResult, error) {
	res := AdoptResult{Adopted: []Info{}, Skipped: []string{}}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: read ledger info: %w", err)
	}
	infos, err := ListAttested(ctx, cfg.Log, cfg.Objects, info.UUID)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: %w", err)
	}
	for i := len(infos) - 1; i >= 0; i-- { // oldest first: the newest are kept (ledger.MaxAttested)
		si := infos[i]
		if si.Attested {
			continue
		}
		b, err := readAll(ctx, cfg.Objects, si.Key)
		if err == nil {
			si.SHA256, si.Attested = ledger.DigestOf(b), true
			_, err = read(bytes.NewReader(b), si)
		}
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			cfg.Logs().Warn("not adopting a snapshot that does not read back", "key", si.Key, "err", err)
			res.Skipped = append(res.Skipped, si.Key)
			continue
		}
		if err := cfg.Log.AttestSnapshot(ctx, si.Seq, si.SHA256); err != nil {
			return res, fmt.Errorf("adopt snapshots: %w", err)
		}
		res.Adopted = append(res.Adopted, si)
	}
	r, err := legacyRetained(ctx, cfg.Objects, info.UUID)
	if err != nil {
		return res, fmt.Errorf("adopt snapshots: %w", err)
	}
	if r > 0 {
		if err := cfg.Log.AttestRetention(ctx, r); err != nil {
			return res, fmt.Errorf("adopt snapshots: %w", err)
		}
		res.Retained = r
	}
	return res, nil
}

func readAll(ctx context.Context, objs *ledger.Bucket, key string) ([]byte, error) {
	rc, err := objs.GetObject(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
