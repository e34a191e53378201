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
// namespaces hold no '_', so the name is unambiguous among namespaces; a
// plain ledger may have it too, which CheckNamespaceLedger tells apart.
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

// CheckNamespaceLedger decides whether l, the existing ledger named
// NamespaceLedger(base.Name, ns), is namespace ns of the ledger base, as a
// setup that would adopt it must know: ledger names may hold '_', so a plain
// ledger "prod_eu" (another team's) has the name of namespace eu of ledger
// prod (issue 38 point 11). It is the namespace's ledger when it carries the
// mark made at its creation (ledger.Info.NamespaceOf, Namespace) naming base
// and ns. A namespace's ledger made by a release before the mark carries
// none; it is recognised by base's namespace registry, which already lists
// ns for this repo (registered: the registration comes before the ledger's
// creation, since the first release of namespaces), and the caller then
// marks it (legacy). Any other ledger is an error wrapping ledger.ErrInvalid
// that says what it is and what to do.
func CheckNamespaceLedger(base ledger.Info, ns string, l ledger.Info, registered bool) (legacy bool, err error) {
	switch {
	case l.NamespaceOf == base.UUID && l.Namespace == ns:
		return false, nil
	case l.NamespaceOf != "":
		return false, fmt.Errorf("ledger %q is namespace %q of the ledger with uuid %s, not namespace %q of ledger %q (uuid %s): "+
			"pick another namespace: %w", l.Name, l.Namespace, l.NamespaceOf, ns, base.Name, base.UUID, ledger.ErrInvalid)
	case registered:
		return true, nil
	}
	return false, fmt.Errorf("ledger %q exists and is not namespace %q of ledger %q: it carries no namespace mark, and %q's namespace registry "+
		"does not list %q for this repo, so it is another ledger of that name (ledger names may hold '_'); nothing was changed: "+
		"pick another namespace, or, if %q is this repo's own plain ledger, set the repo up on it without a namespace (--ledger %s): %w",
		l.Name, ns, base.Name, base.Name, ns, l.Name, l.Name, ledger.ErrInvalid)
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
