package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// Bucket is the KV bucket holding a ledger's swamp state beside the ledger:
// locks (keys "l.…"), the control-plane store ("c.…") and namespace
// registrations ("n.…"); every swamp key is base64url-encoded after its
// prefix, since swamp's keys hold characters KV keys may not.
func Bucket(ledgerName string) string { return "SYNCLEDGER_SWAMP_" + ledgerName }

// Control is swamp's control-plane store (controlPlaneStore) on the bucket.
type Control struct {
	kv ledger.KV
	// skipped, when set, is told of each key List passes over (see listKeys).
	skipped func(key, why string)
}

// NewControl returns the control-plane store on bucket kv.
func NewControl(kv ledger.KV) Control { return Control{kv: kv} }

func cpKey(key string) string { return "c." + base64.RawURLEncoding.EncodeToString([]byte(key)) }

// Put stores data under key.
func (c Control) Put(ctx context.Context, key string, data []byte) error {
	_, err := c.kv.Put(ctx, cpKey(key), data)
	return err
}

// Get returns key's data, or nil when there is none.
func (c Control) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := c.kv.Get(ctx, cpKey(key))
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return e.Value, nil
}

// Delete removes key; removing a missing key is not an error.
func (c Control) Delete(ctx context.Context, key string) error {
	return c.kv.Delete(ctx, cpKey(key), 0)
}

// PutIfAbsent stores data under key unless key holds data, and says whether it did.
func (c Control) PutIfAbsent(ctx context.Context, key string, data []byte) (bool, error) {
	_, err := c.kv.Create(ctx, cpKey(key), data)
	if errors.Is(err, ledger.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// List returns the keys starting with prefix, sorted.
func (c Control) List(ctx context.Context, prefix string) ([]string, error) {
	return listKeys(ctx, c.kv, "c.", prefix, c.skipped)
}

// listKeys returns the decoded keys under kvPrefix whose decoded form starts
// with prefix, sorted (base64url keeps no order: sorted after decoding). Any
// role that may write the bucket may write any key there, so a key that is not
// one swamp's store writes (not base64url, or not in the canonical form that
// store's own Get would ask for) is one skipped row, told to skipped (may be
// nil), never a failed list.
func listKeys(ctx context.Context, kv ledger.KV, kvPrefix, prefix string, skipped func(key, why string)) ([]string, error) {
	entries, err := kv.List(ctx, kvPrefix)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, e := range entries {
		enc := strings.TrimPrefix(e.Key, kvPrefix)
		b, err := base64.RawURLEncoding.DecodeString(enc)
		switch {
		case err != nil:
			if skipped != nil {
				skipped(e.Key, fmt.Sprintf("not base64url after %q: %v", kvPrefix, err))
			}
			continue
		case base64.RawURLEncoding.EncodeToString(b) != enc:
			if skipped != nil {
				skipped(e.Key, "not the canonical encoding of its key")
			}
			continue
		case !strings.HasPrefix(string(b), prefix):
			continue
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out, nil
}

func nsKey(ns string) string { return "n." + base64.RawURLEncoding.EncodeToString([]byte(ns)) }

// RegisterNamespace records that repoID owns namespace ns; the first repo to
// register a namespace owns it, and another repo's registration is refused.
func RegisterNamespace(ctx context.Context, kv ledger.KV, ns, repoID string) error {
	k := nsKey(ns)
	_, err := kv.Create(ctx, k, []byte(repoID))
	if !errors.Is(err, ledger.ErrConflict) {
		return err
	}
	e, err := kv.Get(ctx, k)
	if err != nil {
		return err
	}
	if owner := string(e.Value); owner != repoID {
		return fmt.Errorf("namespace %q belongs to repo %s, not %s: pick another namespace", ns, owner, repoID)
	}
	return nil
}

// NamespaceOwner returns the repo that registered namespace ns ("" none).
func NamespaceOwner(ctx context.Context, kv ledger.KV, ns string) (string, error) {
	e, err := kv.Get(ctx, nsKey(ns))
	if errors.Is(err, ledger.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value), nil
}

// ListNamespaces returns the registered namespaces, sorted.
func ListNamespaces(ctx context.Context, kv ledger.KV) ([]string, error) {
	return listKeys(ctx, kv, "n.", "", nil)
}
