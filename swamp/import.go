package swamp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/swamp/index"
)

// ImportMessagePrefix begins the message of every commit Import publishes; with
// the FingerprintTrailer line it is how a later run recognises its own commits.
const ImportMessagePrefix = "swamp import"

// MergeMessagePrefix begins the message of a commit by which Import merged
// a source's changes into a partition hosts have committed to. It is no
// import commit: a later run merges again rather than make the partition
// the source's.
const MergeMessagePrefix = ImportMessagePrefix + " merge"

// FingerprintTrailer is the message line "Swamp-Import-Fingerprint: <hex>" of an
// import commit that holds its partition's complete source file list: the
// SHA-256 of that list (rel, size, sha256, lastModified of every entry).
const FingerprintTrailer = "Swamp-Import-Fingerprint: "

// ImportMode is the permission bits of imported files (swamp records none).
const ImportMode = 0o644

// Defaults.
const (
	DefaultParallel = 8 // concurrent object copies
	maxAttempts     = 5 // appends per partition after chain conflicts
)

// ImportConfig configures Import.
type ImportConfig struct {
	// Source is the swamp datastore; its root is swamp's client prefix.
	Source *ledger.Bucket
	// Namespace selects a namespaced datastore ("" for solo mode).
	Namespace string
	// SourceName names the source in commit messages (a URL without credentials).
	SourceName string
	// Log and Blobs are the ledger's; the ledger must exist.
	Log   ledger.CommitLog
	Blobs *ledger.Bucket
	// Host is the committer's host id.
	Host string
	// AcceptMismatch imports the bytes an object holds even when they do not
	// match its index entry's sha256 or size. Without it such a file is not
	// imported (and reported).
	AcceptMismatch bool
	// KeepLedger keeps the ledger's file wherever hosts' commits and the
	// source disagree; without it only files swamp regenerates are kept so,
	// and another disagreement leaves its partition untouched (a Conflict).
	KeepLedger bool
	// Parallel bounds concurrent object copies; 0 means DefaultParallel.
	Parallel int
	// TempDir holds downloads while they are hashed; "" means os.TempDir().
	TempDir string
	// Now and Rand default to time.Now and crypto/rand.Reader.
	Now  func() time.Time
	Rand io.Reader
	// Progress, if set, is called after each partition.
	Progress func(ImportProgress)
}

// Action says what Import did with a partition.
type Action string

// Actions.
const (
	Committed Action = "committed" // an import commit was published
	Unchanged Action = "unchanged" // the ledger already holds the partition's source files
	Conflict  Action = "conflict"  // the source and hosts' commits since the last import changed a file each: not touched
	Empty     Action = "empty"     // nothing importable (every file missing, mismatched or invalid)
)

// ImportProgress reports one partition.
type ImportProgress struct {
	Done, Total int // partitions handled so far (this one included), of Total
	Partition   string
	Action      Action
	Files       int   // source files of the partition
	Bytes       int64 // their bytes (as indexed)
	Copied      int   // objects downloaded, verified and stored in the blob store by this run
	CopiedBytes int64
	Commit      string     // Committed: the commit id
	Seq         ledger.Seq // Committed: its seq
	Written     int        // Committed: files the commit writes
	Deleted     int        // Committed: files the commit deletes (gone from the source)
}

// Mismatch is a file whose object does not match its index entry.
type Mismatch struct {
	Path       string `json:"path"`
	WantSize   int64  `json:"wantSize"`
	GotSize    int64  `json:"gotSize"`
	WantSHA256 string `json:"wantSha256,omitempty"`
	GotSHA256  string `json:"gotSha256"`
	Imported   bool   `json:"imported"` // AcceptMismatch: the object's bytes were imported
}

// ImportedCommit is one commit Import published.
type ImportedCommit struct {
	Partition string     `json:"partition"`
	Commit    string     `json:"commit"`
	Seq       ledger.Seq `json:"seq"`
	Files     int        `json:"files"` // written
	Deleted   int        `json:"deleted"`
}

// ImportSummary is what Import did.
type ImportSummary struct {
	Source     string `json:"source"`
	Namespace  string `json:"namespace,omitempty"`
	Format     Format `json:"format"`
	CommitSeq  int64  `json:"commitSeq,omitempty"`
	Partitions int    `json:"partitions"` // partitions of the source
	Committed  int    `json:"committed"`  // partitions committed by this run
	Unchanged  int    `json:"unchanged"`  // partitions the ledger already held
	// Conflicts are partitions where hosts' commits and the source hold a file
	// each at the same path (Collisions), other than one swamp regenerates:
	// not touched.
	Conflicts  []string `json:"conflicts,omitempty"`
	Collisions []string `json:"collisions,omitempty"`
	// KeptLedger are files the source holds too but hosts changed since: the
	// ledger's are kept (files swamp regenerates, or KeepLedger).
	KeptLedger  []string         `json:"keptLedger,omitempty"`
	Files       int              `json:"files"` // source data files (not internal, valid paths)
	Bytes       int64            `json:"bytes"`
	Copied      int              `json:"copied"` // objects copied into the blob store by this run
	CopiedBytes int64            `json:"copiedBytes"`
	Internal    []string         `json:"internal,omitempty"`   // internal files skipped
	Namespaces  []string         `json:"namespaces,omitempty"` // other namespaces' directories skipped by a listing
	Invalid     []string         `json:"invalid,omitempty"`    // paths the ledger cannot hold
	Mismatches  []Mismatch       `json:"mismatches,omitempty"`
	Missing     []string         `json:"missing,omitempty"` // index entries without an object
	Commits     []ImportedCommit `json:"commits,omitempty"`
}

// Complete reports whether every source file is in the ledger: no conflict,
// invalid path, missing object or mismatch left out.
func (s ImportSummary) Complete() bool {
	if len(s.Conflicts)+len(s.Invalid)+len(s.Missing) > 0 {
		return false
	}
	for _, m := range s.Mismatches {
		if !m.Imported {
			return false
		}
	}
	return true
}

type importer struct {
	cfg     ImportConfig
	layout  index.Layout
	lineage string
	sum     *ImportSummary
}

// Import reads the swamp datastore cfg.Source (see ReadRemote) and publishes one
// import commit per partition (ledger.PartitionKey) holding the partition's
// files, after copying each object into the blob store under its SHA-256,
// verified against the entry's sha256 and size where the index has them.
//
// Import is resumable and idempotent. A partition is skipped as Unchanged when
// its last import commit carries the fingerprint of the partition's current
// source file list (FingerprintTrailer), or when the ledger's files of the
// partition already equal the source's. Otherwise, when the partition's head is
// an import commit (or the partition is empty) the commit holds exactly the
// difference: files to write and files the source no longer has. A partition
// whose head is some other commit is not touched: Unchanged if its source
// still equals what the last import committed, a Conflict otherwise. So a run interrupted at any point
// (even between a commit's append and its acknowledgement) and run again
// publishes each remaining partition once and nothing twice.
//
// Partitions are handled one at a time in key order; ctx cancellation stops
// between steps and returns the summary so far with ctx's error. A source
// without any data file is an error wrapping ledger.ErrNotFound (a mistyped URL
// or a missing --namespace, most likely).
func Import(ctx context.Context, cfg ImportConfig) (ImportSummary, error) {
	sum := ImportSummary{Source: cfg.SourceName, Namespace: cfg.Namespace}
	if cfg.Source == nil || cfg.Log == nil || cfg.Blobs == nil || cfg.Host == "" {
		return sum, fmt.Errorf("swamp import: Source, Log, Blobs and Host are required: %w", ledger.ErrInvalid)
	}
	layout, err := index.NewLayout(cfg.Namespace)
	if err != nil {
		return sum, fmt.Errorf("swamp import: %w", err)
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	info, err := cfg.Log.Info(ctx)
	if err != nil {
		return sum, fmt.Errorf("swamp import: %w", err)
	}
	snap, err := ReadRemote(ctx, cfg.Source, layout)
	if err != nil {
		return sum, fmt.Errorf("swamp import: %w", err)
	}
	sum.Format, sum.CommitSeq, sum.Internal, sum.Namespaces = snap.Format, snap.CommitSeq, snap.Internal, snap.Namespaces

	groups := map[string][]index.Entry{}
	for rel, e := range snap.Entries {
		if err := ledger.ValidatePath(rel); err != nil {
			sum.Invalid = append(sum.Invalid, rel)
			continue
		}
		p := ledger.PartitionKey(rel)
		groups[p] = append(groups[p], e)
		sum.Files++
		sum.Bytes += e.Size
	}
	slices.Sort(sum.Invalid)
	if sum.Files == 0 {
		hint := ""
		if len(snap.Namespaces) > 0 {
			hint = fmt.Sprintf(" (it holds the namespaces %s: use --namespace)", strings.Join(snap.Namespaces, ", "))
		}
		return sum, fmt.Errorf("swamp import: %s holds no data files%s: %w", layoutName(cfg.SourceName, layout), hint, ledger.ErrNotFound)
	}
	parts := slices.Sorted(maps.Keys(groups))
	sum.Partitions = len(parts)
	im := &importer{cfg: cfg, layout: layout, lineage: info.UUID, sum: &sum}
	for i, p := range parts {
		if err := ctx.Err(); err != nil {
			return sum, fmt.Errorf("swamp import: %w", err)
		}
		es := groups[p]
		sort.Slice(es, func(a, b int) bool { return es[a].Key < es[b].Key })
		pr, err := im.partition(ctx, p, es)
		if err != nil {
			return sum, fmt.Errorf("swamp import: partition %q: %w", p, err)
		}
		pr.Done, pr.Total = i+1, len(parts)
		if cfg.Progress != nil {
			cfg.Progress(pr)
		}
	}
	return sum, nil
}

func layoutName(source string, l index.Layout) string {
	if source == "" {
		source = "the source"
	}
	if l.Namespace != "" {
		return source + " namespace " + l.Namespace
	}
	return source
}

// Fingerprint returns the fingerprint of a partition's source file list.
func Fingerprint(es []index.Entry) string {
	sorted := slices.Clone(es)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Key < sorted[b].Key })
	h := sha256.New()
	for _, e := range sorted {
		fmt.Fprintf(h, "%q %d %q %q\n", e.Key, e.Size, e.SHA256, e.LastModified)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// IsImportCommit reports whether an event was published by Import as the
// partition's import (not a merge into hosts' commits: MergeMessagePrefix).
func IsImportCommit(ev ledger.Event) bool {
	return strings.HasPrefix(ev.Message, ImportMessagePrefix) && !strings.HasPrefix(ev.Message, MergeMessagePrefix)
}

// importFingerprint returns the fingerprint an import commit carries, "" if none.
func importFingerprint(ev ledger.Event) string {
	if !IsImportCommit(ev) {
		return ""
	}
	for line := range strings.SplitSeq(ev.Message, "\n") {
		if fp, ok := strings.CutPrefix(line, FingerprintTrailer); ok {
			return strings.TrimSpace(fp)
		}
	}
	return ""
}

// partitionState is a partition's files in the ledger.
type partitionState struct {
	head    ledger.Record
	hasHead bool
	files   map[string]ledger.Entry
	lastFP  string // fingerprint of the last import commit, "" if none or none complete
	// atImport is the partition's files right after its last import commit;
	// nil if it has none.
	atImport map[string]ledger.Entry
	folded   bool
}

func (im *importer) readHead(ctx context.Context, p string) (partitionState, error) {
	head, err := im.cfg.Log.PartitionHead(ctx, p)
	switch {
	case err == nil:
		return partitionState{head: head, hasHead: true}, nil
	case errors.Is(err, ledger.ErrNotFound):
		return partitionState{files: map[string]ledger.Entry{}, folded: true}, nil
	default:
		return partitionState{}, err
	}
}

// fold reads the partition's history into st.files.
func (im *importer) fold(ctx context.Context, p string, st *partitionState) error {
	if st.folded {
		return nil
	}
	st.files = map[string]ledger.Entry{}
	err := im.cfg.Log.ReadPartition(ctx, p, 1, func(r ledger.Record) error {
		es, err := eventEntries(ctx, im.cfg.Blobs, r.Event)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Deleted {
				delete(st.files, e.Path)
			} else {
				st.files[e.Path] = e
			}
		}
		if IsImportCommit(r.Event) {
			st.lastFP = importFingerprint(r.Event)
			st.atImport = maps.Clone(st.files)
		}
		st.head = r
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the partition's history: %w", err)
	}
	st.folded = true
	return nil
}

// eventEntries returns an event's entries, reading its manifest blob when the
// entries were too large to inline.
func eventEntries(ctx context.Context, blobs *ledger.Bucket, ev ledger.Event) ([]ledger.Entry, error) {
	if ev.Manifest.IsZero() {
		return ev.Entries, nil
	}
	b, err := ledger.ReadBlob(ctx, blobs, ev.Manifest)
	if err != nil {
		return nil, fmt.Errorf("read manifest of commit %s: %w", ev.Commit, err)
	}
	return ledger.DecodeManifest(b, ev.Partition)
}

func (im *importer) partition(ctx context.Context, p string, src []index.Entry) (ImportProgress, error) {
	pr := ImportProgress{Partition: p, Files: len(src)}
	for _, e := range src {
		pr.Bytes += e.Size
	}
	fp := Fingerprint(src)
	c := newCopier(im, src)
	for attempt := 1; ; attempt++ {
		st, err := im.readHead(ctx, p)
		if err != nil {
			return pr, err
		}
		if st.hasHead && importFingerprint(st.head.Event) == fp {
			pr.Action = Unchanged
			im.sum.Unchanged++
			return pr, nil
		}
		if err := im.fold(ctx, p, &st); err != nil {
			return pr, err
		}
		if st.lastFP == fp {
			pr.Action = Unchanged
			im.sum.Unchanged++
			return pr, nil
		}
		// The commit: a merge's (no fingerprint: hosts' commits stay the
		// partition's) or the import's.
		var delta []ledger.Entry
		commitFP, complete := fp, false
		if st.hasHead && !IsImportCommit(st.head.Event) {
			// Hosts have committed since the last import (or before any): the
			// source's changes are merged in, the hosts' kept.
			action, merged, err := im.merge(ctx, c, p, st)
			if err != nil {
				return pr, err
			}
			pr.Copied, pr.CopiedBytes = c.copied, c.copiedBytes
			if action != Committed {
				c.report()
				pr.Action = action
				return pr, nil
			}
			delta, commitFP = merged, ""
		} else {
			desired, all, err := c.materialize(ctx, st.files)
			if err != nil {
				return pr, err
			}
			pr.Copied, pr.CopiedBytes = c.copied, c.copiedBytes
			delta, complete = diff(desired, st.files), all
			if len(delta) == 0 {
				pr.Action = Unchanged
				if len(desired) == 0 {
					pr.Action = Empty
				}
				im.sum.Unchanged++
				c.report()
				return pr, nil
			}
		}
		ic, err := im.publish(ctx, p, st, delta, commitFP, complete)
		var ce *ledger.ConflictError
		if errors.As(err, &ce) && attempt < maxAttempts {
			continue // another writer extended the partition: look again
		}
		if err != nil {
			return pr, err
		}
		c.report()
		pr.Action, pr.Commit, pr.Seq, pr.Written, pr.Deleted = Committed, ic.Commit, ic.Seq, ic.Files, ic.Deleted
		im.sum.Committed++
		im.sum.Commits = append(im.sum.Commits, ic)
		return pr, nil
	}
}

// merge works out what a partition hosts have committed to takes from the
// source, file by file against the partition's last import (nothing, if none):
// what only the source changed (added, rewritten, removed) is taken; what only
// hosts changed is kept. A file both changed, to different content, stays the
// ledger's if swamp regenerates it (Regenerated) or with KeepLedger; otherwise
// the partition is a Conflict, untouched. Unchanged: nothing to take.
func (im *importer) merge(ctx context.Context, c *copier, p string, st partitionState) (Action, []ledger.Entry, error) {
	desired, _, err := c.materialize(ctx, st.files)
	if err != nil {
		return "", nil, err
	}
	var delta []ledger.Entry
	var kept, clash []string
	disagree := func(path string) {
		if Regenerated(path) || im.cfg.KeepLedger {
			kept = append(kept, path)
		} else {
			clash = append(clash, path)
		}
	}
	// A three-way merge per file, the last import the base.
	for _, path := range slices.Sorted(maps.Keys(desired)) {
		w := desired[path]
		a, imported := st.atImport[path]
		if imported && sameFile(a, w) {
			continue // not changed in the source since its import: the hosts' state wins
		}
		h, ok := st.files[path]
		switch {
		case !ok && !imported:
			delta = append(delta, w)
		case ok && sameFile(h, w):
		case ok && imported && sameFile(h, a): // only the source changed it
			delta = append(delta, w)
		default: // both changed it (or hosts deleted it)
			disagree(path)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(st.atImport)) {
		if _, ok := desired[path]; ok {
			continue
		}
		if h, ok := st.files[path]; ok && sameFile(h, st.atImport[path]) {
			delta = append(delta, ledger.Entry{Path: path, Deleted: true}) // only the source removed it
		}
	}
	if len(clash) > 0 {
		im.sum.Conflicts = append(im.sum.Conflicts, p)
		im.sum.Collisions = append(im.sum.Collisions, clash...)
		return Conflict, nil, nil
	}
	im.sum.KeptLedger = append(im.sum.KeptLedger, kept...)
	if len(delta) == 0 {
		im.sum.Unchanged++
		return Unchanged, nil, nil
	}
	return Committed, delta, nil
}

func sameFile(a, b ledger.Entry) bool {
	return a.SHA256 == b.SHA256 && a.Size == b.Size && a.Mode == b.Mode
}

// diff returns the entries that turn have into want, sorted by path.
func diff(want, have map[string]ledger.Entry) []ledger.Entry {
	var out []ledger.Entry
	for path, w := range want {
		if h, ok := have[path]; !ok || h.SHA256 != w.SHA256 || h.Size != w.Size || h.Mode != w.Mode {
			out = append(out, w)
		}
	}
	for path := range have {
		if _, ok := want[path]; !ok {
			out = append(out, ledger.Entry{Path: path, Deleted: true})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	return out
}

// publish builds the partition's commit of delta on st's head and publishes
// it (ledger.Publish): every object delta names is in the blob store already
// (copier.materialize, or the ledger's own content).
func (im *importer) publish(ctx context.Context, p string, st partitionState, delta []ledger.Entry, fp string, complete bool) (ImportedCommit, error) {
	now := im.cfg.Now()
	id, err := ledger.NewCommitID(im.cfg.Rand)
	if err != nil {
		return ImportedCommit{}, err
	}
	ic := ImportedCommit{Partition: p, Commit: id}
	for _, e := range delta {
		if e.Deleted {
			ic.Deleted++
		} else {
			ic.Files++
		}
	}
	var msg strings.Builder
	prefix := ImportMessagePrefix
	if fp == "" {
		prefix = MergeMessagePrefix
	}
	fmt.Fprintf(&msg, "%s of %s", prefix, im.cfg.SourceName)
	if im.cfg.Namespace != "" {
		fmt.Fprintf(&msg, " namespace %s", im.cfg.Namespace)
	}
	fmt.Fprintf(&msg, " (%s", im.sum.Format)
	if im.sum.Format == FormatV2 {
		fmt.Fprintf(&msg, " commitSeq %d", im.sum.CommitSeq)
	}
	fmt.Fprintf(&msg, "): %d written, %d deleted", ic.Files, ic.Deleted)
	if complete && fp != "" {
		fmt.Fprintf(&msg, "\n\n%s%s", FingerprintTrailer, fp)
	}
	var mark projector.Mark
	if st.hasHead {
		mark = projector.Mark{ModelSeq: st.head.Event.ModelSeq, Seq: st.head.Seq}
	}
	events, err := projector.CommitEvents(im.lineage, func(string) projector.Mark { return mark },
		ledger.Commit{ID: id, Host: im.cfg.Host, At: now, Message: msg.String(), Entries: delta})
	if err != nil {
		return ic, err
	}
	if len(events) != 1 || events[0].Partition != p {
		return ic, fmt.Errorf("import commit of %q built %d events: %w", p, len(events), ledger.ErrInvalid)
	}
	seqs, err := ledger.Publish(ctx, im.cfg.Log, im.cfg.Blobs, events)
	if err != nil {
		return ic, err
	}
	ic.Seq = seqs[len(seqs)-1]
	return ic, nil
}
