package host

import (
	"context"
	"fmt"

	"github.com/syncledger/syncledger/projector/statedb"
)

// Repair is Verify that also restores, from the blob store, every altered file
// that is not a local edit: its size, mtime and mode are still those the index
// recorded when the file was written (an edit moves the mtime), yet its content
// differs. That is corruption — of the disk, or a tool that kept the mtime — which
// the commit scan cannot see (it trusts size, mtime and mode), and which no sync,
// fetch or rebuild touches. Each restored file is written durably and its index
// row takes the new mtime; it moves from Altered to Restored. Missing files and
// local edits stay reported: commit them, or take the ledger's version.
func (h *Host) Repair(ctx context.Context) (VerifyResult, error) {
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return VerifyResult{}, aerr
	}
	defer release()
	out, err := h.verify(ctx)
	if err != nil {
		return out, err
	}
	altered := out.Altered
	out.Altered = []string{}
	for _, p := range altered {
		ok, err := h.repair(ctx, p)
		if err != nil {
			return out, err
		}
		if ok {
			out.Restored = append(out.Restored, p)
		} else {
			out.Altered = append(out.Altered, p)
		}
	}
	return out, nil
}

// repair restores path if its row vouches for size, mtime and mode (see Repair);
// false means a local edit, left alone.
func (h *Host) repair(ctx context.Context, path string) (bool, error) {
	row, ok, err := h.rows.Get(path)
	if err != nil || !ok || row.Lazy {
		return false, err
	}
	fi, err := h.dir.Stat(path)
	if err != nil {
		return false, fmt.Errorf("repair %s: %w", path, err)
	}
	if fi.Size != row.Size || fi.Mode != row.Mode || !fi.ModTime.Equal(row.MTime) {
		return false, nil
	}
	rc, err := h.blobsPort().Get(ctx, row.Digest)
	if err != nil {
		return false, fmt.Errorf("repair %s: %w", path, err)
	}
	defer rc.Close()
	nfi, err := h.dir.Write(path, rc, row.Digest, row.Size, row.Mode)
	if err != nil {
		return false, fmt.Errorf("repair %s: %w", path, err)
	}
	row.MTime = nfi.ModTime
	if err := h.db.Update(func(tx *statedb.Tx) error { return tx.Put(path, row) }); err != nil {
		return false, fmt.Errorf("repair %s: %w", path, err)
	}
	h.log.Warn("restored a corrupted file from the blob store", "path", path)
	return true, nil
}
