package host

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/ignore"
)

// CommitOptions describe a commit.
type CommitOptions struct {
	Message string
	// Partitions, when set, limits the commit to files of these partitions,
	// and its walk to the directories that can hold them
	// (ledger.PartitionsUnder).
	Partitions []string
	// Prepared is the work done ahead of the commit — a Prepare of this
	// Host, swamp's hints (PrepareFiles) — that it takes rather than do
	// again: a file it holds, unchanged since it was read, is not read
	// again, and content it says is stored is not stored again. The commit
	// adds what it reads and stores (nil: nothing is kept).
	Prepared *Prepared
	// Paths, when set, limits the commit to these paths (resolve --mine).
	Paths []string
	// MaxPaths, when positive, is the most paths the result lists (Paths:
	// the first published, sorted); Written and Deleted count them all. A
	// caller that prints a few keeps a commit of a million files from
	// holding a million paths.
	MaxPaths int
	// Changed, when not nil, limits the scan to these paths (slash-separated,
	// relative to the cache; a directory stands for its whole subtree): the
	// caller vouches that no other path changed since the cache was last scanned
	// whole, as a trusted dirty set does (package dirty). Empty means nothing
	// changed: the commit reads no index. Nil scans the whole cache.
	Changed []string
	// Settle, when set, is the push's way to settle a conflict with another
	// host's commits (a *ConflictError: paths both changed): swamp's
	// renumbering moves this host's data versions past the ledger's
	// (swamp.CommitRenumbered). Called under the push (the cache held), it
	// may sync, resolve and move files; when it returns nil the push scans
	// its whole scope again and publishes what it finds, up to
	// Config.Policy's Settles times. Its error ends the push.
	Settle func(ctx context.Context, conflict *ConflictError) error
	// Fences are the locks the commit is made under (ledger.Fence: swamp's
	// locks, as the agent holds them): each of its commits carries them, and
	// the log refuses one once another holder took a lock since, storing
	// nothing (*ledger.LockLostError, ErrLockLost). A lost lock is not retried
	// like a chain conflict: Commit returns it, the changes kept in the cache,
	// uncommitted. Each fence takes a message of the commit's batch, so a
	// commit then holds that many partitions fewer.
	Fences []ledger.Fence
}

// CommitResult says what a commit did. A change of more partitions than one
// commit holds is published as several (Commit): the counts are their sums.
type CommitResult struct {
	Nothing    bool         `json:"nothing"`           // nothing to commit: no event published
	Commit     string       `json:"commit,omitempty"`  // the last commit published
	Commits    []CommitPart `json:"commits,omitempty"` // every commit published, in order: one unless the change was split
	Seqs       []ledger.Seq `json:"seqs,omitempty"`
	Partitions []string     `json:"partitions,omitempty"`
	Written    int          `json:"written"`
	Deleted    int          `json:"deleted"`
	Bytes      int64        `json:"bytes"`
	Attempts   int          `json:"attempts"`
	Pulled     int          `json:"pulled"` // remote events applied while resolving conflicts
	HWM        ledger.Seq   `json:"hwm"`
	Paths      []string     `json:"paths,omitempty"`
}

// CommitPart is one commit a Commit published: an atomic batch, at
// consecutive seqs.
type CommitPart struct {
	Commit     string       `json:"commit"`
	Seqs       []ledger.Seq `json:"seqs"`
	Partitions int          `json:"partitions"`
	Written    int          `json:"written"`
	Deleted    int          `json:"deleted"`
}

// DefaultCommitHold is Config.CommitHold's default: a change of up to
// 131,072 files (and 1,000 partitions) is one commit, all or nothing.
const DefaultCommitHold = 1 << 17

// Commit publishes the cache's changes: one commit, all or nothing, when they
// touch at most Config.CommitPartitions partitions (ledger.MaxBatch, the most
// one JetStream atomic batch holds, unless set lower) and at most
// Config.CommitHold files; a wider change is published as consecutive commits
// of whole partitions, in partition order — of at most CommitPartitions
// partitions each (batches), and, for more files than the hold, of at most an
// eighth of its files each (holdGroups; one partition of more files alone) —
// each one atomic on its own and recorded before the next is built, sharing
// the message with "(part i of n)" appended. A change of more files than
// CommitHold is never held at once: the scan stops hashing when it has found
// that many and only counts each partition's changes, and each group's commit
// scans and hashes its own partitions (of the paths of Changed, when set).
// Chain conflicts are retried per commit as for a single one (up to
// Config.Policy's Conflicts each). Commit runs the write pipeline
// (pipeline.go: plan → stage → publish → record). An error after some of them were published leaves
// those published and recorded, and the rest of the changes uncommitted in the
// cache: the next Commit publishes them; the result lists the commits
// published.
func (h *Host) Commit(ctx context.Context, opt CommitOptions) (_ CommitResult, err error) {
	ctx, done := h.watching(ctx, "commit")
	defer func() { err = done(err) }()
	release, aerr := h.acquire(ctx)
	if aerr != nil {
		return CommitResult{}, aerr
	}
	defer release()
	if slices.Contains(opt.Changed, ignore.FileName) {
		// New ignore rules change what every path's scan says, with no event
		// for those paths.
		opt.Changed = nil
	}
	if opt.Changed != nil && len(opt.Changed) == 0 {
		// Nothing changed since the last full scan: no index to load.
		_, _, hwm, err := h.checkLineage(ctx)
		if err != nil {
			return CommitResult{}, err
		}
		return CommitResult{Nothing: true, HWM: hwm, Attempts: 1}, nil
	}
	s, err := h.load(ctx, false)
	if err != nil {
		return CommitResult{}, err
	}
	res, err := h.runPush(ctx, s, newPush(opt, h.cfg.Policy, h.cfg.CommitHold))
	slices.Sort(res.Paths) // Partitions stay in Seqs' order, one for one
	if err != nil && len(res.Commits) > 0 {
		err = &PartialCommitError{Published: res.Commits, Err: err}
	}
	return res, err
}

// commitPartitions is the most partitions one commit of opt holds: its batch
// holds its fence checks too.
func (h *Host) commitPartitions(opt CommitOptions) int {
	return max(1, min(h.cfg.CommitPartitions, ledger.MaxBatch-len(opt.Fences)))
}

// holdGroups splits the partitions of over (each with its count of changed
// files) into consecutive groups, in partition order, of at most maxParts
// partitions and hold files each — a partition of more than hold files alone.
func holdGroups(over map[string]int, maxParts, hold int) [][]string {
	var out [][]string
	var cur []string
	n := 0
	for _, p := range slices.Sorted(maps.Keys(over)) {
		if len(cur) > 0 && (len(cur) == maxParts || n+over[p] > hold) {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, p)
		n += over[p]
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// batches splits changes (sorted by path) into the changes of consecutive runs
// of at most limit partitions, in partition order, each sorted by
// path: the commits a change too wide for one atomic batch is published as.
// A partition is never split between two of them.
func batches(changes []ledger.Entry, limit int) [][]ledger.Entry {
	byPart := map[string][]ledger.Entry{}
	for _, e := range changes {
		p := ledger.PartitionKey(e.Path)
		byPart[p] = append(byPart[p], e)
	}
	if len(byPart) <= limit {
		return [][]ledger.Entry{changes}
	}
	var out [][]ledger.Entry
	for parts := range slices.Chunk(slices.Sorted(maps.Keys(byPart)), limit) {
		var b []ledger.Entry
		for _, p := range parts {
			b = append(b, byPart[p]...)
		}
		slices.SortFunc(b, func(x, y ledger.Entry) int { return strings.Compare(x.Path, y.Path) })
		out = append(out, b)
	}
	return out
}

// PartMessage is the message of commit i of n that one commit's changes were
// split into (Commit): the message with "(part i of n)" appended.
func PartMessage(msg string, i, n int) string {
	if msg == "" {
		return fmt.Sprintf("(part %d of %d)", i, n)
	}
	return fmt.Sprintf("%s (part %d of %d)", msg, i, n)
}

// PartialCommitError is a Commit that failed after publishing some of the
// commits its changes were split into: those are published and recorded, the
// rest of the changes are still uncommitted in the cache.
type PartialCommitError struct {
	Published []CommitPart // the commits published, in order
	Err       error        // the failure
}

func (e *PartialCommitError) Error() string {
	ids := make([]string, len(e.Published))
	for i, p := range e.Published {
		ids[i] = p.Commit
	}
	return fmt.Sprintf("%v (published before it, of the same change: %s; the rest of the change stays uncommitted in the cache: commit again once this is fixed)",
		e.Err, strings.Join(ids, ", "))
}

func (e *PartialCommitError) Unwrap() error { return e.Err }

// syncCommitted makes the commit's files (and the deleted files' absence)
// durable before anything is published: the ledger must never hold content this
// cache could lose in a power cut, or, after one, the next scan would find the
// older or truncated file, take it for a local change and publish it over the
// good version on every host. The scan's stage fsynced each changed file's
// content (commitStage); this syncs the directories on every path.
func (h *Host) syncCommitted(changes []ledger.Entry) error {
	paths := make([]string, len(changes))
	for i, e := range changes {
		paths[i] = e.Path
	}
	if err := h.dir.Flush(nil, paths, h.cfg.Parallel); err != nil {
		return fmt.Errorf("commit: sync the committed files: %w", err)
	}
	return nil
}
