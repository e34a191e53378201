package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

// foreignCatalogs returns the catalog each other namespace exports
// (NS/.catalog-export.json, its rows), read only; a namespace with no ledger
// or no export yet is left out.
func (a *Agent) foreignCatalogs(ctx context.Context, req ForeignCatalogsRequest) ([]ForeignCatalog, error) {
	a.foreignMu.Lock()
	defer a.foreignMu.Unlock()
	out := []ForeignCatalog{}
	for _, ns := range req.Namespaces {
		b, err := a.foreignFile(ctx, ns, ".catalog-export.json")
		if err != nil {
			return nil, err
		}
		if b != nil && json.Valid(b) && bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
			out = append(out, ForeignCatalog{Namespace: ns, Rows: b})
		}
	}
	return out, nil
}

// foreignContent returns one file's content in another namespace's ledger,
// read only (nil when absent).
func (a *Agent) foreignContent(ctx context.Context, req ForeignContentRequest) ([]byte, error) {
	if err := ledger.ValidatePath(req.Path); err != nil {
		return nil, fmt.Errorf("foreign content %q: %w", req.Path, err)
	}
	a.foreignMu.Lock()
	defer a.foreignMu.Unlock()
	return a.foreignFile(ctx, req.Namespace, req.Path)
}

// foreignFile returns path's content in namespace ns's ledger as of now
// (nil: no such file, or no such namespace), under foreignMu.
func (a *Agent) foreignFile(ctx context.Context, ns, path string) ([]byte, error) {
	if ns == a.cfg.Namespace {
		return nil, fmt.Errorf("namespace %q is this datastore's own, not a foreign one", ns)
	}
	h, ok := a.foreign[ns]
	if !ok {
		var err error
		h, err = a.cfg.Ports.Foreign(ctx, ns)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
		h.Release()
		if a.foreign == nil {
			a.foreign = map[string]*host.Host{}
		}
		a.foreign[ns] = h
		if _, err := h.Sync(ctx, host.SyncOptions{Lazy: true}); err != nil {
			return nil, fmt.Errorf("read namespace %s: %w", ns, err)
		}
	}
	// The file's content, fetched if the sync left it lazy.
	_, err := h.Fetch(ctx, []string{path})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns, err)
	}
	f, err := h.Dir().Open(path) // a foreign cache's root is longer than this one's: long paths too
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
