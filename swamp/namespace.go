package swamp

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// namespacePattern is swamp's rule for a namespace slug.
var namespacePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// NamespaceLedger names the ledger that holds namespace ns of a datastore on
// ledger base: "BASE_NS". Each namespace is a ledger of its own (its hosts sync
// only its files), and base keeps what the namespaces share: the namespace
// registry, the locks and the control plane (its swamp bucket). swamp's
// namespaces hold no '_', so the name is unambiguous.
func NamespaceLedger(base, ns string) (string, error) {
	if len(ns) > 64 || !namespacePattern.MatchString(ns) {
		return "", fmt.Errorf("namespace %q: want swamp's [a-z0-9][a-z0-9-]* (at most 64): %w", ns, ledger.ErrInvalid)
	}
	name := base + "_" + ns
	if err := ledger.ValidateName(name); err != nil {
		return "", fmt.Errorf("the ledger of namespace %q would be %q: %w (use a shorter ledger or namespace name)", ns, name, err)
	}
	return name, nil
}

// NamespaceBlobs is the blob store URL of namespace ns's ledger, given the
// base ledger's: the same store under a prefix of its own ("ns-NS/"), so
// that one ledger's blob GC never sees another's blobs; for a NATS object
// store, the bucket BUCKET_ns_NS.
func NamespaceBlobs(raw, ns string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("blob store URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file", "s3", "gs":
		u.Path = strings.TrimSuffix(u.Path, "/") + "/ns-" + ns
		if u.RawPath != "" {
			u.RawPath = strings.TrimSuffix(u.RawPath, "/") + "/ns-" + ns
		}
	case "nats":
		u.Host += "_ns_" + ns
	default:
		return "", fmt.Errorf("blob store URL %q: no namespace store for scheme %q: %w", raw, u.Scheme, ledger.ErrInvalid)
	}
	return u.String(), nil
}
