package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp"
)

func newSwampDoctorCmd(a *app) *cobra.Command {
	var (
		cache, from, ns, backupDir string
		repair, asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a swamp host's cache against its remote index; detect and repair the #3193 state",
		Long: `Doctor reads a swamp host's cache directory (--cache, e.g.
~/.swamp/repos/REPO_ID), its sync-state sidecar .datastore-sync-state.json,
and the remote index of the datastore at --from (the same URLs as --blobs;
--namespace NS for a namespaced datastore, whose files sit under CACHE/NS/). It
reports the files the remote index has that the cache lacks, or holds with
another size or sha256, and classifies the cache:

  healthy            nothing missing or different                  (exit 0)
  behind             files missing, the sidecar arms no fast path:
                     swamp's next sync fetches them                 (exit 5)
  armed              swamp-club#3193: the sidecar's commitSeq equals
                     the remote _meta.json's while files are missing:
                     every swamp pull returns at once and fetches
                     nothing until some host commits again          (exit 5)
  stale-fingerprint  files missing and the sidecar holds a monolith
                     fingerprint (remoteIndexETag/Generation) while the
                     remote has a monolith that may be frozen       (exit 5)

Under lazy hydration (lazyPullActive) an absent data/**/raw file is expected
and not reported.

--repair, for a cache that is not healthy, changes the sidecar and nothing
else, so that swamp's next pull takes its slow path (assembles every shard and
downloads what is missing):

  commitSeq                                   removed (if present)
  remoteIndexETag / remoteIndexGeneration     set to "" (if non-empty)

Every other field (localDirty, dirtyPaths, bulkInvalidated, lazyPullActive,
lastVerifiedAt, …) and every data file stay as they are. A backup of the old
sidecar is written first, to --backup-dir (default: the cache's parent
directory, since swamp could push a file left in the cache). With --repair the
exit code is 0 once swamp's next sync can fetch every finding, 5 if some file
differs at the same size (swamp's pull may keep such a file: delete it by hand).
Stop swamp on the host while repairing.

When the ledger's server answers (--nats, --ledger and credentials as every
command), doctor also checks what it lets this user do: permissions older or
wider than this build's are reported on stderr, with the command that renders
them again.`,
		Example: `  syncledger swamp doctor --cache ~/.swamp/repos/4f6c… --from 's3://swamp-bucket/datastore?region=eu-west-1'
  syncledger swamp doctor --cache ~/.swamp/repos/4f6c… --from gs://swamp-bucket/prefix --namespace team-a --repair`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if cache == "" || from == "" {
				return usagef("--cache (the swamp cache directory) and --from (the datastore URL) are required")
			}
			remote, err := a.openBucket(ctx, from, ledger.RetryPolicy{})
			if err != nil {
				return err
			}
			rep, err := swamp.Doctor(ctx, swamp.DoctorConfig{Cache: cache, Remote: remote, Namespace: ns, Repair: repair, BackupDir: backupDir})
			if err != nil {
				return err
			}
			if p := a.permissionProblem(ctx); p != "" {
				a.logger.Warn(p)
			}
			if asJSON {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				printDoctorReport(a, rep, repair)
			}
			return doctorExit(rep)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cache, "cache", "", "the swamp host's cache directory (required; not syncledger's --cache)")
	fs.StringVar(&from, "from", "", "the remote datastore: s3://BUCKET/PREFIX?…, gs://BUCKET/PREFIX or file:///DIR (required)")
	fs.StringVar(&ns, "namespace", "", "swamp namespace (giga-swamp mode)")
	fs.BoolVar(&repair, "repair", false, "disarm the sidecar's fast paths (see above) after writing a backup of it")
	fs.StringVar(&backupDir, "backup-dir", "", "where --repair writes the sidecar's backup (default: the cache's parent directory)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// doctorExit is 0 for a healthy cache, and for a repaired one whose findings
// swamp's next sync fetches; otherwise exitSwampFindings.
func doctorExit(rep swamp.DoctorReport) error {
	if rep.State == swamp.Healthy {
		return nil
	}
	if rep.Repair != nil {
		sameSize := 0
		for _, d := range rep.Different {
			if d.LocalSize == d.RemoteSize {
				sameSize++
			}
		}
		if sameSize == 0 {
			return nil
		}
		return withExitCode(exitSwampFindings, fmt.Errorf("swamp doctor: %d files differ from the remote at the same size; swamp's pull may keep them: delete them from the cache", sameSize))
	}
	return withExitCode(exitSwampFindings, nil)
}

func printDoctorReport(a *app, r swamp.DoctorReport, repair bool) {
	w := a.stdout
	fmt.Fprintf(w, "swamp cache %s", r.Cache)
	if r.Namespace != "" {
		fmt.Fprintf(w, " (namespace %s)", r.Namespace)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  remote:  %s", r.Format)
	if r.Format == swamp.FormatV2 {
		fmt.Fprintf(w, ", commitSeq %d", r.CommitSeq)
	}
	fmt.Fprintf(w, ", %d files\n", r.Files)
	sc := r.Sidecar
	switch {
	case !sc.Present:
		fmt.Fprintf(w, "  sidecar: absent (swamp takes its slow path)\n")
	case !sc.Valid:
		fmt.Fprintf(w, "  sidecar: unreadable by swamp (it takes its slow path)\n")
	default:
		seq := "none"
		if sc.CommitSeq != nil {
			seq = fmt.Sprint(*sc.CommitSeq)
		}
		fp := "none"
		if sc.Fingerprint != "" {
			fp = sc.FingerprintField + " " + sc.Fingerprint
		}
		fmt.Fprintf(w, "  sidecar: version %d, commitSeq %s, fingerprint %s, localDirty %v, lazyPullActive %v\n",
			sc.Version, seq, fp, sc.LocalDirty, sc.LazyPullActive)
	}
	fmt.Fprintf(w, "  missing: %d\n", len(r.Missing))
	listSome(a, r.Missing, 20)
	fmt.Fprintf(w, "  different: %d\n", len(r.Different))
	var ds []string
	for _, d := range r.Different {
		s := fmt.Sprintf("%s: remote %d bytes, cache %d bytes", d.Path, d.RemoteSize, d.LocalSize)
		if d.LocalSHA256 != "" {
			s += fmt.Sprintf(", sha256 remote %s cache %s", d.RemoteSHA256, d.LocalSHA256)
		}
		ds = append(ds, s)
	}
	listSome(a, ds, 20)
	if r.LazyAbsent > 0 {
		fmt.Fprintf(w, "  absent under lazy hydration (expected): %d\n", r.LazyAbsent)
	}
	if len(r.Invalid) > 0 {
		fmt.Fprintf(w, "  remote paths not checked (not valid cache paths): %d\n", len(r.Invalid))
	}
	switch r.State {
	case swamp.Healthy:
		fmt.Fprintf(w, "state: healthy\n")
	case swamp.Behind:
		fmt.Fprintf(w, "state: behind: the sidecar arms no fast path; swamp's next sync fetches the missing files\n")
	case swamp.Armed:
		fmt.Fprintf(w, "state: ARMED (swamp-club#3193): the sidecar's commitSeq %d equals the remote's while %d files are missing or differ;\n"+
			"       every swamp pull takes the commitSeq fast path and fetches nothing until some host commits again\n",
			*sc.CommitSeq, r.Findings())
	case swamp.StaleFingerprint:
		fmt.Fprintf(w, "state: stale-fingerprint: the sidecar's %s may match a frozen monolith, so swamp's pull may skip the missing files\n",
			sc.FingerprintField)
	}
	switch {
	case r.Repair != nil && len(r.Repair.Changes) == 0:
		fmt.Fprintf(w, "repair: the sidecar arms no fast path; nothing changed\n")
	case r.Repair != nil:
		fmt.Fprintf(w, "repair: backup of the old sidecar: %s\n", r.Repair.Backup)
		fmt.Fprintf(w, "repair: changed in %s (nothing else, no data file):\n", sc.Path)
		for _, c := range r.Repair.Changes {
			fmt.Fprintf(w, "    %s\n", c)
		}
		fmt.Fprintf(w, "swamp's next sync takes its slow path and fetches what is missing\n")
	case !repair && r.State == swamp.Armed:
		fmt.Fprintf(w, "run again with --repair to remove the sidecar's commitSeq (and empty a monolith fingerprint, if set)\n")
	case !repair && r.State == swamp.StaleFingerprint:
		fmt.Fprintf(w, "run again with --repair to set the sidecar's %s to \"\"\n", sc.FingerprintField)
	}
}
