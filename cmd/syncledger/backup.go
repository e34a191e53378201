package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/blobs"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/maintain"
	"github.com/syncledger/syncledger/projector/host"
)

// blobKeysFile names, in a backup of a ledger whose blobs are outside NATS,
// the list of what the backup references in the blob store.
const blobKeysFile = "blobs.txt"

func newBackupCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "backup DIR",
		Short: "Back up everything the ledger keeps on the server into DIR (admin)",
		Long: `Backup writes into DIR (created; it must hold no backup) a JetStream snapshot of
each stream the ledger (--ledger) keeps on the server, with JetStream's own
snapshot: the log first — its events, its consumers' positions, and in its
metadata the ledger's UUID and settings, the snapshots' attestations and the
retention bound — then, when the blob store is a NATS object store
(nats://BUCKET), that store (the blobs and the snapshots), then swamp's bucket
(locks, control plane, namespaces), the hosts' heartbeats and the consumers'
dead letters. DIR/backup.json, written last, describes it: a directory without
it is no backup.

Consistency: each stream is taken at one point, the log first. Every blob an
event of the backup references was stored before the event (content first), so
the object store's snapshot, taken after, holds it: backup checks that each one
is there and fails otherwise. The buckets are a moment younger than the log.

A blob store outside NATS (file://, s3://, gs://) is not copied: it stays where
it is. Backup lists in DIR/blobs.txt every blob and snapshot the backup
references there; keep them (bucket versioning, no gc of what a backup you may
restore references — see docs/ops.md, Backups), and 'restore' checks they are
still there.

Restore it with 'syncledger restore DIR'. It needs the admin role.`,
		Example: `  syncledger backup /backup/prod-$(date +%F)
  syncledger --ledger prod backup /backup/prod --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := backupLedger(cmd.Context(), a, args[0], false)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(b)
			}
			printBackup(a, "backed up", args[0], b)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the backup's description (backup.json) as JSON")
	return cmd
}

// backupLedger takes the backup of a's ledger into dir (see newBackupCmd).
// With partial (the ledger a restore replaces), what the server lacks — the
// object store, blobs the log references — is recorded in the backup
// (Missing, MissingBlobs) instead of failing it: a restore that failed part way
// leaves such a ledger, and the restore that follows must still keep it.
func backupLedger(ctx context.Context, a *app, dir string, partial bool) (*natsjs.Backup, error) {
	lg, err := a.Log(ctx)
	if err != nil {
		return nil, err
	}
	info, err := lg.Info(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := blobs.ParseURL(info.Blobs)
	if err != nil {
		return nil, err
	}
	opt := natsjs.BackupOptions{Partial: partial}
	if spec.Scheme == blobs.SchemeNATS {
		opt.ObjectStore = spec.Bucket
	}
	led, err := a.ledgerOn(ctx, a.ledgerName)
	if err != nil {
		return nil, err
	}
	b, err := led.Backup(ctx, dir, opt)
	if err != nil {
		return nil, err
	}
	if len(b.Missing) > 0 {
		// The blob store is one of the missing: no blob to check.
		if err := b.Describe(dir); err != nil {
			return nil, fmt.Errorf("backup ledger %q: %w", b.Ledger, err)
		}
		return b, nil
	}
	cfg, err := a.snapshotConfig(ctx)
	if err != nil {
		return nil, err
	}
	refs, snaps, err := maintain.Referenced(ctx, cfg, b.Head)
	if err != nil {
		return nil, fmt.Errorf("backup ledger %q: list the blobs it references: %w", b.Ledger, err)
	}
	missing, err := missingBlobs(ctx, a, refs, snaps)
	if err != nil {
		return nil, fmt.Errorf("backup ledger %q: %w", b.Ledger, err)
	}
	if len(missing) > 0 && partial {
		b.MissingBlobs = len(missing)
	} else if len(missing) > 0 {
		return nil, fmt.Errorf("backup ledger %q: the blob store lacks %d of the blobs the log references (%s): the ledger is damaged already (see docs/ops.md, a blob lost); nothing written to %s counts as a backup: %w",
			b.Ledger, len(missing), strings.Join(missing[:min(len(missing), 5)], ", "), dir, ledger.ErrNotFound)
	}
	if opt.ObjectStore == "" {
		var sb strings.Builder
		for _, d := range refs {
			sb.WriteString(d.String() + "\n")
		}
		for _, k := range snaps {
			sb.WriteString(k + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, blobKeysFile), []byte(sb.String()), 0o600); err != nil {
			return nil, fmt.Errorf("backup ledger %q: %w", b.Ledger, err)
		}
		b.BlobKeys, b.BlobCount = blobKeysFile, len(refs)+len(snaps)
	}
	if err := b.Describe(dir); err != nil {
		return nil, fmt.Errorf("backup ledger %q: %w", b.Ledger, err)
	}
	return b, nil
}

// missingBlobs returns which of the blobs refs and the snapshot objects snaps
// the ledger's blob store does not hold: one listing, not a request each.
func missingBlobs(ctx context.Context, a *app, refs []ledger.Digest, snaps []string) ([]string, error) {
	bl, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	have := map[ledger.Digest]bool{}
	if err := bl.List(ctx, func(d ledger.Digest, _ ledger.ObjectInfo) error { have[d] = true; return nil }); err != nil {
		return nil, fmt.Errorf("list the blob store: %w", err)
	}
	var missing []string
	for _, d := range refs {
		if !have[d] {
			missing = append(missing, d.String())
		}
	}
	for _, k := range snaps {
		if _, err := bl.StatObject(ctx, k); errors.Is(err, ledger.ErrNotFound) {
			missing = append(missing, k)
		} else if err != nil {
			return nil, err
		}
	}
	return missing, nil
}

func newRestoreCmd(a *app) *cobra.Command {
	var (
		replace, asJSON bool
		keep            string
	)
	cmd := &cobra.Command{
		Use:   "restore DIR",
		Short: "Bring a ledger back from a backup taken by 'syncledger backup' (admin)",
		Long: `Restore brings back the ledger backed up in DIR (its name is the backup's): each
stream restored with JetStream's own restore — the object store first (content
before the events that reference it), then the log with its consumers, then
swamp's bucket, the heartbeats and the dead letters — exactly as they were.
Then it makes them as this release makes them ('syncledger upgrade'), and
checks that the snapshots' attestations and the retention bound are the
backup's, setting them again if not. For a blob store outside NATS it checks
that the store still holds every blob the backup lists (blobs.txt).

A ledger that exists is replaced only with --replace, and then backed up first,
into --keep (default: DIR.replaced-<time>): what the server held is never lost
by a restore. What the replaced ledger attested besides the backup is not
carried over, and restore says so: a snapshot attested above the backup's head
is of the history the restore rewinds (no host may adopt it), and its retention
bound would tell hosts the restored log lacks events it holds; one at or below
the backup's head may be adopted again ('syncledger snapshot --adopt', which
verifies it against the log).

Mirrors ('syncledger mirror create', recorded in the ledger's stream; the
replaced ledger's and the backup's): each is deleted before the log is
restored and made anew after, from the origin through its JetStream domain — a
mirror never copies a seq it holds again, so left as it was it would serve the
lost commits at their seqs. One out of reach is reported on stderr with the
command that makes it anew once its region is back ('mirror create
--replace'), and the restore of the origin still succeeds (exit 0); until then
its hosts, once they find it made before the restore, read from the origin and
refuse to commit through it.

Before it changes anything, restore reads every archive of the backup and
checks its size and digest against backup.json: a backup damaged since it was
taken is refused, nothing changed. A restore that fails part way all the same
(the server full or out of reach, an archive it refuses) says what the server
holds then and prints the way out: with --replace, the restore of the ledger as
it was (--keep), which makes its mirrors anew; without, the same restore once
the cause is fixed.

Hosts need nothing: each one's next sync (or swamp command) finds that the
ledger lost the commits it applied after the backup — by their commit ids, not
only their seqs — rebuilds its cache from the ledger and republishes them from
its cache: the ledger gets back every commit any host still holds. It needs the
admin role.`,
		Example: `  syncledger restore /backup/prod-2026-12-01
  syncledger restore /backup/prod-2026-12-01 --replace`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dir := args[0]
			b, err := natsjs.ReadBackup(dir)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("ledger") && a.ledgerName != b.Ledger {
				return usagef("--ledger %s: the backup in %s is of ledger %s (a restore keeps its name)", a.ledgerName, dir, b.Ledger)
			}
			a.ledgerName = b.Ledger
			res, err := restoreLedger(ctx, a, dir, b, replace, keep)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printJSON(res)
			}
			if res.Kept != "" {
				fmt.Fprintf(a.stdout, "the ledger as it was is backed up in %s\n", res.Kept)
				for _, l := range res.KeptLacks {
					fmt.Fprintf(a.stdout, "  partial: %s (a restore that failed part way left it so)\n", l)
				}
			}
			printBackup(a, "restored", dir, res.Backup)
			for _, c := range res.Changed {
				fmt.Fprintf(a.stdout, "  %s\n", c)
			}
			for _, d := range res.Dropped {
				fmt.Fprintf(a.stdout, "  %s\n", d)
			}
			for _, m := range res.Mirrors {
				if m.Recreated {
					fmt.Fprintf(a.stdout, "  mirror in domain %s: made anew (it copies the restored ledger from seq 1)\n", m.Domain)
					continue
				}
				fmt.Fprintf(a.stderr, "warning: the mirror in domain %s was not made anew: %s\n  until it is, it holds the commits the restore rewound: its hosts read from the origin once they find it stale, and refuse to commit through it; once its region is reachable, run:\n    %s\n", m.Domain, m.Error, m.Command)
			}
			fmt.Fprintln(a.stdout, "hosts heal on their next sync: each republishes what it holds of the commits after the backup")
			return nil
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "replace the ledger if it exists (it is backed up into --keep first)")
	cmd.Flags().StringVar(&keep, "keep", "", "where --replace backs up the ledger it replaces (default: DIR.replaced-<time>)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// restored is what restore did.
type restored struct {
	Backup *natsjs.Backup `json:"backup"`
	Kept   string         `json:"kept,omitempty"` // the replaced ledger's backup
	// KeptLacks says what the replaced ledger lacked (a restore that failed
	// part way left it so), which its backup lacks too.
	KeptLacks []string `json:"keptLacks,omitempty"`
	Changed   []string `json:"changed,omitempty"` // what the configuration and attestation pass set again
	// Dropped says what the replaced ledger attested that the restored one
	// does not (its attestations and retention bound are the backup's).
	Dropped []string         `json:"dropped,omitempty"`
	Mirrors []restoredMirror `json:"mirrors,omitempty"`
}

// restoredMirror is what restore did with one mirror of the ledger.
type restoredMirror struct {
	natsjs.MirrorRecord
	Recreated bool   `json:"recreated"`
	Error     string `json:"error,omitempty"`
	// Command recreates it, when restore could not.
	Command string `json:"command,omitempty"`
}

// restoreLedger restores the backup b in dir (see newRestoreCmd).
func restoreLedger(ctx context.Context, a *app, dir string, b *natsjs.Backup, replace bool, keep string) (restored, error) {
	res := restored{Backup: b}
	// A damaged file of the backup is found before anything changes.
	if err := b.Check(dir); err != nil {
		return res, fmt.Errorf("restore ledger %q: %w; nothing was changed: restore another backup", b.Ledger, err)
	}
	c, err := a.NATS(ctx)
	if err != nil {
		return res, err
	}
	mirrors := b.Mirrors
	if _, err := c.Ledger(b.Ledger).Log(ctx); err == nil {
		if !replace {
			return res, fmt.Errorf("restore ledger %q: it exists (a restore replaces it: pass --replace, which backs it up first): %w", b.Ledger, ledger.ErrConflict)
		}
		if keep == "" {
			keep = strings.TrimRight(dir, string(filepath.Separator)) + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
		}
		live, err := backupLedger(ctx, a, keep, true)
		if err != nil {
			return res, fmt.Errorf("restore ledger %q: back up the ledger it replaces first: %w (nothing was restored)", b.Ledger, err)
		}
		res.Kept, res.KeptLacks = keep, lacks(live)
		res.Dropped = droppedAttestations(live.Attested, b)
		mirrors = unionMirrors(live.Mirrors, b.Mirrors)
		a.resetLedger()
	} else if !errors.Is(err, ledger.ErrNoLedger) && !errors.Is(err, ledger.ErrNotFound) {
		return res, err
	}
	// The mirrors go first: none serves the history the restore rewinds
	// while the origin is restored (a mirror never copies a seq it holds
	// again: it would keep the lost commits at their seqs). One out of
	// reach is made anew below, or reported with the command that does.
	deleted := map[string]error{}
	for _, m := range mirrors {
		deleted[m.Domain] = c.DeleteMirror(ctx, b.Ledger, m)
	}
	if _, err := c.Restore(ctx, dir, natsjs.RestoreOptions{Replace: replace}); err != nil {
		return res, partialRestore(b, dir, res.Kept, mirrors, err)
	}
	a.resetLedger()
	changed, err := hardenRestored(ctx, a, b)
	res.Changed = changed
	if err != nil {
		return res, restoredBut(a, b, mirrors, err)
	}
	// The restore's mark, which the mirrors made below copy: a mirror
	// without it (one restore could not reach) is stale, and its hosts read
	// from the origin and refuse to commit through it until it is made anew.
	lg, err := a.Log(ctx)
	if err == nil {
		err = lg.MarkRestored(ctx, fmt.Sprintf("%s (backup of seq %d)", time.Now().UTC().Format(time.RFC3339Nano), b.Head))
	}
	if err != nil {
		return res, restoredBut(a, b, mirrors, err)
	}
	for _, m := range mirrors {
		rm := restoredMirror{MirrorRecord: m}
		if _, err := c.RecreateMirror(ctx, b.Ledger, m); err != nil {
			if derr := deleted[m.Domain]; derr != nil && errors.Is(err, ledger.ErrUnreachable) {
				err = derr
			}
			rm.Error, rm.Command = err.Error(), mirrorCommand(a, b.Ledger, m)
		} else {
			rm.Recreated = true
		}
		res.Mirrors = append(res.Mirrors, rm)
	}
	if b.BlobKeys != "" {
		missing, err := missingListed(ctx, a, filepath.Join(dir, b.BlobKeys))
		if err != nil {
			return res, fmt.Errorf("restore ledger %q: restored, but checking its blobs: %w", b.Ledger, err)
		}
		if len(missing) > 0 {
			return res, fmt.Errorf("restore ledger %q: restored, but the blob store %s no longer holds %d of the blobs the backup references (%s): bring them back from the store's versioning or another copy: %w",
				b.Ledger, redactURL(b.Blobs), len(missing), strings.Join(missing[:min(len(missing), 5)], ", "), ledger.ErrNotFound)
		}
	}
	return res, nil
}

// restoreError is a restore that failed after it began to change the server:
// what the server holds now, and the commands that lead out.
type restoreError struct {
	err  error
	cmds []string
}

func (e *restoreError) Error() string      { return e.err.Error() }
func (e *restoreError) Unwrap() error      { return e.err }
func (e *restoreError) Commands() []string { return e.cmds }

// partialRestore is the error of a restore whose streams did not all come
// back (err): the server holds part of the backup, and the mirrors were
// deleted. With a ledger replaced, the way out is to restore the ledger as it
// was (kept): its mirrors are made anew with it. Without one, the restore again
// once the cause is fixed (it replaces what this one restored).
func partialRestore(b *natsjs.Backup, dir, kept string, mirrors []natsjs.MirrorRecord, err error) error {
	state := "the server holds part of the backup"
	if len(mirrors) > 0 {
		domains := make([]string, len(mirrors))
		for i, m := range mirrors {
			domains[i] = m.Domain
		}
		state += fmt.Sprintf(", and the ledger's mirrors (domain %s) were deleted first", strings.Join(domains, ", "))
	}
	if kept != "" {
		return &restoreError{err: fmt.Errorf("%w; %s; the ledger it replaced is backed up in %s", err, state, kept),
			cmds: []string{fmt.Sprintf("syncledger restore %s --replace   (the ledger as it was before this restore, its mirrors made anew)", host.ShellQuote(kept))}}
	}
	return &restoreError{err: fmt.Errorf("%w; %s", err, state),
		cmds: []string{fmt.Sprintf("syncledger restore %s --replace   (again, once the cause above is fixed: it replaces what was restored)", host.ShellQuote(dir))}}
}

// restoredBut is the error of a restore whose streams came back but whose
// pass after (the configuration, the attestations, the restore's mark) failed
// (err): err's own way out, then the commands that make the mirrors, deleted
// first, anew.
func restoredBut(a *app, b *natsjs.Backup, mirrors []natsjs.MirrorRecord, err error) error {
	e := &restoreError{err: fmt.Errorf("restore ledger %q: restored, but: %w", b.Ledger, err), cmds: errorCommands(err)}
	if len(mirrors) > 0 {
		e.err = fmt.Errorf("%w; its mirrors were deleted first and are not made anew yet", e.err)
		for _, m := range mirrors {
			e.cmds = append(e.cmds, mirrorCommand(a, b.Ledger, m))
		}
	}
	return e
}

// unionMirrors returns the mirrors of the replaced ledger and of the backup,
// one per domain (the replaced ledger's record first: the newer).
func unionMirrors(live, backup []natsjs.MirrorRecord) []natsjs.MirrorRecord {
	out := slices.Clone(live)
	for _, m := range backup {
		if !slices.ContainsFunc(out, func(o natsjs.MirrorRecord) bool { return o.Domain == m.Domain }) {
			out = append(out, m)
		}
	}
	return out
}

// mirrorCommand is the command that makes mirror m of ledger name anew, run
// where restore ran (its --nats) once the mirror's region is reachable.
func mirrorCommand(a *app, name string, m natsjs.MirrorRecord) string {
	read := m.URL
	if read == "" {
		read = "URL-OF-A-SERVER-IN-DOMAIN-" + m.Domain
	}
	return fmt.Sprintf("syncledger --nats %s --read-nats %s --ledger %s mirror create --replace --replicas %d",
		redactURL(a.natsURL), read, name, max(m.Replicas, 1))
}

// droppedAttestations says what the replaced ledger attested (live) that
// the restored one, whose attestations and retention bound are the
// backup's, does not. They are not carried over: a snapshot attested above
// the backup's head is of the history the restore rewound (a host adopting
// it would hold the lost commits' files and miss the new ones at the same
// seqs), and a retention bound raised after the backup would tell hosts the
// restored log lacks events it holds (or, above its head, leave no snapshot
// usable once the head passes it). One at or below the backup's head may be
// of the same history: the log verifies it, and the admin adopts it again.
func droppedAttestations(live ledger.Attestations, b *natsjs.Backup) []string {
	var out []string
	seqs := slices.Sorted(maps.Keys(live.Snapshots))
	for _, seq := range seqs {
		if b.Attested.Snapshots[seq] == live.Snapshots[seq] {
			continue
		}
		if seq > b.Head {
			out = append(out, fmt.Sprintf("the replaced ledger's attestation of the snapshot at seq %d: not restored (above the backup's head %d: a snapshot of the history the restore rewound, which no host may adopt)", seq, b.Head))
		} else {
			out = append(out, fmt.Sprintf("the replaced ledger's attestation of the snapshot at seq %d: not restored (if the log verifies it, syncledger snapshot --adopt attests it again)", seq))
		}
	}
	if live.Retained != b.Attested.Retained {
		out = append(out, fmt.Sprintf("the replaced ledger's retention bound %d: the restored ledger's is the backup's, %d (its log holds the events the backup holds)", live.Retained, b.Attested.Retained))
	}
	return out
}

// hardenRestored applies this release's configuration to the restored
// ledger's resources and checks its attestations and retention bound against
// the backup's, setting again what differs: the restored ledger attests what
// the backup does, nothing of the replaced ledger's (droppedAttestations). It
// returns what it changed.
func hardenRestored(ctx context.Context, a *app, b *natsjs.Backup) ([]string, error) {
	var changed []string
	// The upgrade (issue 38's least privilege): the restored resources made
	// as this release makes them, whatever release took the backup — the
	// stream, the buckets, the dead letters, the object store.
	changes, err := upgradeLedger(ctx, a, b.Ledger)
	for _, ch := range changes {
		if ch.Action != "" {
			changed = append(changed, fmt.Sprintf("%s: %s", ch.Resource, ch.Action))
		}
	}
	if err != nil {
		return changed, err
	}
	a.resetLedger() // the upgrade may have made a resource anew
	lg, err := a.Log(ctx)
	if err != nil {
		return changed, err
	}
	if lg.UUID() != b.UUID {
		return changed, fmt.Errorf("the restored ledger has uuid %s, the backup %s: %w", lg.UUID(), b.UUID, ledger.ErrLineage)
	}
	att, err := lg.Attested(ctx)
	if err != nil {
		return changed, err
	}
	for seq, sum := range b.Attested.Snapshots {
		if att.Snapshots[seq] != sum {
			if err := lg.AttestSnapshot(ctx, seq, sum); err != nil {
				return changed, err
			}
			changed = append(changed, fmt.Sprintf("attested the snapshot at seq %d again", seq))
		}
	}
	if att.Retained != b.Attested.Retained {
		if err := lg.SetRetention(ctx, b.Attested.Retained); err != nil {
			return changed, err
		}
		changed = append(changed, fmt.Sprintf("set the retention bound to %d again", b.Attested.Retained))
	}
	return changed, nil
}

// missingListed returns the entries of a backup's blob list the ledger's
// blob store no longer holds.
func missingListed(ctx context.Context, a *app, list string) ([]string, error) {
	f, err := os.Open(list)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs []ledger.Digest
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if d, err := ledger.ParseDigest(line); err == nil {
			refs = append(refs, d)
		} else {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return missingBlobs(ctx, a, refs, keys)
}

// printBackup says what a backup holds.
func printBackup(a *app, verb, dir string, b *natsjs.Backup) {
	fmt.Fprintf(a.stdout, "%s ledger %s (%s) at seq %d, %s:\n", verb, b.Ledger, b.UUID, b.Head, dir)
	for _, s := range b.Streams {
		st, _ := s.Stats()
		fmt.Fprintf(a.stdout, "  %-12s %-40s %d messages, %s archived\n", s.Role, s.Stream, st.Msgs, humanBytes(s.Bytes))
	}
	if b.BlobKeys != "" {
		fmt.Fprintf(a.stdout, "  blobs: %d referenced in %s, listed in %s (not copied: keep them there)\n", b.BlobCount, redactURL(b.Blobs), b.BlobKeys)
	}
	for _, l := range lacks(b) {
		fmt.Fprintf(a.stdout, "  partial: %s\n", l)
	}
}

// lacks says what a partial backup lacks (natsjs.BackupOptions.Partial).
func lacks(b *natsjs.Backup) []string {
	var out []string
	for _, s := range b.Missing {
		out = append(out, "the server held no stream "+s)
	}
	if b.MissingBlobs > 0 {
		out = append(out, fmt.Sprintf("the blob store lacked %d of the blobs the log references", b.MissingBlobs))
	}
	return out
}
