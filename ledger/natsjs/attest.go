package natsjs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// Attestations (ledger.Attestations) live in the stream's metadata, which only the
// admin role may change (natsauth denies STREAM.UPDATE to the others):
//
//	syncledger.snapshot.<seq, 20 digits>  the SHA-256 (hex) of the snapshot at seq
//	syncledger.retained                   the retention bound (decimal)
//
// Readers that do not know them ignore them.
const (
	metaSnapshotPrefix = "syncledger.snapshot."
	metaRetained       = "syncledger.retained"
)

// Attested implements ledger.CommitLog: one stream info request.
func (l *logDriver) Attested(ctx context.Context) (ledger.Attestations, error) {
	if l.rep != nil {
		if err := l.rep.reachable(ctx, l.name); err != nil {
			return ledger.Attestations{}, fmt.Errorf("ledger %q: read attestations: %w", l.name, err)
		}
	}
	var st streamState
	if err := l.request(ctx, apiPrefix+"STREAM.INFO."+l.stream, nil, &st); err != nil {
		return ledger.Attestations{}, fmt.Errorf("ledger %q: read attestations: %w", l.name, l.mapErr(err))
	}
	if u := st.Config.Metadata[MetaUUID]; u != l.uuid {
		return ledger.Attestations{}, fmt.Errorf("ledger %q: stream %s now holds ledger %s, not %s: %w", l.name, l.stream, u, l.uuid, ledger.ErrLineage)
	}
	return attestationsOf(st.Config.Metadata), nil
}

func attestationsOf(md map[string]string) ledger.Attestations {
	a := ledger.Attestations{Snapshots: map[ledger.Seq]ledger.Digest{}}
	for k, v := range md {
		s, ok := strings.CutPrefix(k, metaSnapshotPrefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		d, derr := ledger.ParseDigest(v)
		if err == nil && derr == nil && n > 0 {
			a.Snapshots[ledger.Seq(n)] = d
		}
	}
	if n, err := strconv.ParseUint(md[metaRetained], 10, 64); err == nil {
		a.Retained = ledger.Seq(n)
	}
	return a
}

func snapshotMetaKey(seq ledger.Seq) string {
	return fmt.Sprintf("%s%020d", metaSnapshotPrefix, uint64(seq))
}

// AttestSnapshot implements ledger.CommitLog.
func (l *logDriver) AttestSnapshot(ctx context.Context, seq ledger.Seq, sum ledger.Digest) error {
	key, val := snapshotMetaKey(seq), sum.String()
	err := l.updateMeta(ctx, func(md map[string]string) bool { return md[key] == val }, func(md map[string]string) {
		md[key] = val
		var keys []string
		for k := range md {
			if strings.HasPrefix(k, metaSnapshotPrefix) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys) // 20 digits: by seq
		for len(keys) > ledger.MaxAttested {
			delete(md, keys[0])
			keys = keys[1:]
		}
	})
	if err != nil {
		return fmt.Errorf("ledger %q: attest the snapshot at seq %d: %w", l.name, seq, err)
	}
	return nil
}

// AttestRetention implements ledger.CommitLog.
func (l *logDriver) AttestRetention(ctx context.Context, before ledger.Seq) error {
	val := strconv.FormatUint(uint64(before), 10)
	err := l.updateMeta(ctx, func(md map[string]string) bool {
		n, err := strconv.ParseUint(md[metaRetained], 10, 64)
		return err == nil && ledger.Seq(n) >= before
	}, func(md map[string]string) { md[metaRetained] = val })
	if err != nil {
		return fmt.Errorf("ledger %q: attest the retention bound %d: %w", l.name, before, err)
	}
	return nil
}

// SetRetention implements ledger.CommitLog: the bound set to before, lower
// or higher (0 removes it).
func (l *logDriver) SetRetention(ctx context.Context, before ledger.Seq) error {
	val := strconv.FormatUint(uint64(before), 10)
	err := l.updateMeta(ctx, func(md map[string]string) bool {
		v, ok := md[metaRetained]
		return before == 0 && !ok || ok && v == val
	}, func(md map[string]string) {
		if before == 0 {
			delete(md, metaRetained)
		} else {
			md[metaRetained] = val
		}
	})
	if err != nil {
		return fmt.Errorf("ledger %q: set the retention bound to %d: %w", l.name, before, err)
	}
	return nil
}

// updateMeta changes the stream's metadata until holds says it holds: the
// stream's configuration is read as the server gives it and sent back whole
// (fields this build does not know kept) with the metadata changed, then read
// again, since a concurrent update by another process may have overwritten
// ours. A refused update (not the admin) wraps ledger.ErrPermission.
func (l *logDriver) updateMeta(ctx context.Context, holds func(map[string]string) bool, change func(map[string]string)) error {
	for range 5 {
		var info struct {
			apiResponse
			Config map[string]json.RawMessage `json:"config"`
		}
		if err := l.request(ctx, apiPrefix+"STREAM.INFO."+l.stream, nil, &info); err != nil {
			return l.mapErr(err)
		}
		var md map[string]string
		if err := json.Unmarshal(info.Config["metadata"], &md); err != nil || md[MetaUUID] != l.uuid {
			return fmt.Errorf("stream %s does not hold ledger %s any more: %w", l.stream, l.uuid, ledger.ErrLineage)
		}
		if holds(md) {
			return nil
		}
		md = maps.Clone(md)
		change(md)
		b, err := json.Marshal(md)
		if err != nil {
			return err
		}
		info.Config["metadata"] = b
		body, err := json.Marshal(info.Config)
		if err != nil {
			return err
		}
		var resp apiResponse
		subj := apiPrefix + "STREAM.UPDATE." + l.stream
		if err := l.requestOnce(ctx, subj, body, &resp); err != nil {
			if pe := lastRefusal(l.nc, func(s string) bool { return s == subj }); pe != nil {
				return fmt.Errorf("%w: only the admin role may", pe)
			}
			if !answerLost(err) {
				return err
			}
		}
	}
	return fmt.Errorf("stream %s: the metadata update kept being overwritten by other processes", l.stream)
}

// MarkRestored sets the ledger's restore mark (MetaRestored) to mark: a
// restore's last step before it makes the mirrors anew, which copy it. A
// mirror whose mark is not the origin's is stale (StaleMirrorError). Only the
// admin may (ledger.ErrPermission).
func (l *Log) MarkRestored(ctx context.Context, mark string) error {
	return l.d.markRestored(ctx, mark)
}

// markRestored is Log.MarkRestored.
func (l *logDriver) markRestored(ctx context.Context, mark string) error {
	if mark == "" {
		return fmt.Errorf("ledger %q: mark restored: no mark: %w", l.name, ledger.ErrInvalid)
	}
	err := l.updateMeta(ctx, func(md map[string]string) bool { return md[MetaRestored] == mark }, func(md map[string]string) { md[MetaRestored] = mark })
	if err != nil {
		return fmt.Errorf("ledger %q: mark restored: %w", l.name, err)
	}
	return nil
}

// checkNamespaceMark checks a namespace mark (LedgerConfig.NamespaceOf, Namespace):
// both empty, or a UUID and a name. A malformed mark read from a stream is
// no mark.
func checkNamespaceMark(of, ns string) error {
	switch {
	case of == "" && ns == "":
		return nil
	case ns == "" || len(ns) > 64:
		return fmt.Errorf("namespace mark: namespace %q: %w", ns, ledger.ErrInvalid)
	}
	if err := ledger.ValidateUUID(of); err != nil {
		return fmt.Errorf("namespace mark: %w", err)
	}
	return nil
}

// MarkNamespace marks the ledger, made without the mark (by a release before
// it), as namespace ns of the ledger whose UUID is of (ledger.Info); the mark
// is made once and never changed: a ledger marked otherwise is an error
// wrapping ledger.ErrInvalid. Only the admin may (ledger.ErrPermission).
func (l *Log) MarkNamespace(ctx context.Context, of, ns string) error {
	return l.d.markNamespace(ctx, of, ns)
}

func (l *logDriver) markNamespace(ctx context.Context, of, ns string) error {
	if of == "" {
		return fmt.Errorf("ledger %q: mark as a namespace: no base ledger: %w", l.name, ledger.ErrInvalid)
	}
	if err := checkNamespaceMark(of, ns); err != nil {
		return fmt.Errorf("ledger %q: mark as a namespace: %w", l.name, err)
	}
	var other error
	err := l.updateMeta(ctx, func(md map[string]string) bool {
		if have := md[MetaNamespaceOf]; have != "" && (have != of || md[MetaNamespace] != ns) {
			other = fmt.Errorf("it is marked namespace %q of ledger %s: %w", md[MetaNamespace], have, ledger.ErrInvalid)
			return true
		}
		return md[MetaNamespaceOf] == of && md[MetaNamespace] == ns
	}, func(md map[string]string) { md[MetaNamespaceOf], md[MetaNamespace] = of, ns })
	if err == nil {
		err = other
	}
	if err != nil {
		return fmt.Errorf("ledger %q: mark as namespace %q of ledger %s: %w", l.name, ns, of, err)
	}
	return nil // Info still says what the stream held when the log was opened
}
