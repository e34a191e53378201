package projector

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// CommitEvents builds the events that publish commit on the ledger lineage: its
// entries grouped by partition (ledger.PartitionKey), one event per partition in
// partition order, each extending its partition's chain from marks(partition)
// (ModelSeq = mark+1, Prev = mark.Seq), with Parts/Part numbering the commit's
// events. The commit's ID, Host, At and Message are the caller's: the core takes
// no clock. Events are checked with ledger.ValidateEvent; more partitions than
// ledger.MaxBatch fail with ledger.ErrTooLarge: one commit is one atomic batch.
// Splitting a wider change into several commits is the shell's (host.Commit).
//
// Append them with the log; the log refuses them (ledger.ErrConflict) if another
// host extended a partition since the marks were read.
func CommitEvents(lineage string, marks func(partition string) Mark, commit ledger.Commit) ([]ledger.Event, error) {
	if len(commit.Entries) == 0 {
		return nil, fmt.Errorf("build commit %s: no entries: %w", commit.ID, ledger.ErrInvalid)
	}
	groups := map[string][]ledger.Entry{}
	for _, en := range commit.Entries {
		p := ledger.PartitionKey(en.Path)
		groups[p] = append(groups[p], en)
	}
	if len(groups) > ledger.MaxBatch {
		return nil, fmt.Errorf("build commit %s: %d partitions, limit %d: %w", commit.ID, len(groups), ledger.MaxBatch, ledger.ErrTooLarge)
	}
	parts := slices.Sorted(maps.Keys(groups))
	events := make([]ledger.Event, len(parts))
	for i, p := range parts {
		es := groups[p]
		slices.SortFunc(es, func(a, b ledger.Entry) int { return strings.Compare(a.Path, b.Path) })
		m := marks(p)
		events[i] = ledger.Event{
			V: ledger.FormatVersion, Ledger: lineage,
			Commit: commit.ID, Host: commit.Host, At: commit.At, Message: commit.Message,
			Partition: p, ModelSeq: m.ModelSeq + 1, Prev: m.Seq,
			Parts: len(parts), Part: i + 1, Entries: es,
		}
		if err := ledger.ValidateEvent(events[i]); err != nil {
			return nil, fmt.Errorf("build commit %s: %w", commit.ID, err)
		}
	}
	return events, nil
}

// CommitEvents builds the events of a local commit against the durable lineage
// and marks (see the package function). It fails with ErrReadyOutstanding while work is
// staged or outstanding: a commit is built on persisted marks only; and with a
// *ClashError (ErrClash) when the entries would make a path a file and a
// directory at once in this host's own index (shadow.go).
func (c *Core) CommitEvents(commit ledger.Commit) ([]ledger.Event, error) {
	if c.out != nil || c.HasReady() {
		return nil, fmt.Errorf("build commit %s: staged work not advanced: %w", commit.ID, ErrReadyOutstanding)
	}
	if c.lineage == "" {
		return nil, fmt.Errorf("build commit %s: no ledger adopted: %w", commit.ID, ledger.ErrLineage)
	}
	if err := c.checkClash(commit.Entries); err != nil {
		return nil, fmt.Errorf("build commit %s: %w", commit.ID, err)
	}
	marks := map[string]Mark{}
	for _, en := range commit.Entries {
		p := ledger.PartitionKey(en.Path)
		if _, ok := marks[p]; ok {
			continue
		}
		m, err := c.mark(p)
		if err != nil {
			return nil, fmt.Errorf("build commit %s: %w", commit.ID, err)
		}
		marks[p] = m
	}
	return CommitEvents(c.lineage, func(p string) Mark { return marks[p] }, commit)
}

// Touched returns the paths the records' entries write or delete, sorted and
// distinct: what a remote change touched. Entries must be resolved.
func Touched(recs ...ledger.Record) []string {
	var paths []string
	for _, r := range recs {
		for _, en := range r.Event.Entries {
			paths = append(paths, en.Path)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// Conflicts returns the paths of local (a host's uncommitted changes) that the
// records change to something else, sorted: after a chain conflict the shell syncs
// the partitions and retries only if this is empty (docs/design.md §4). A path the records
// leave exactly as local has it is not a conflict, nor one local holds as one
// of the records had it before a later record changed it: that content is
// committed (a host's own commit whose outcome it never learned, see
// Change.Earlier). Entries must be resolved.
func Conflicts(local []ledger.Entry, recs []ledger.Record) []string {
	recs = slices.Clone(recs)
	slices.SortStableFunc(recs, func(a, b ledger.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	remote := map[string][]ledger.Entry{}
	for _, r := range recs {
		for _, en := range r.Event.Entries {
			remote[en.Path] = append(remote[en.Path], en)
		}
	}
	var out []string
	for _, l := range local {
		vs, ok := remote[l.Path]
		if ok && !slices.ContainsFunc(vs, func(r ledger.Entry) bool { return sameEntry(l, r) }) {
			out = append(out, l.Path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sameEntry(a, b ledger.Entry) bool {
	if a.Deleted || b.Deleted {
		return a.Deleted == b.Deleted
	}
	return a.SHA256 == b.SHA256 && a.Size == b.Size && a.Mode == b.Mode
}
