package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp"
)

func newSwampImportCmd(a *app) *cobra.Command {
	var (
		from, repo, ns, fsDir      string
		acceptMismatch, keepLedger bool
		parallel                   int
		asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Import a swamp datastore into the ledger: one commit per partition",
		Long: `Import reads the swamp datastore at --from the way an unscoped swamp pull does —
_index/_meta.json v2 and every shard it lists; else the v1 monolith
.datastore-index.json; else a listing of the objects — and publishes the
ledger's first commits: one per partition (swamp's shard key), holding the
partition's files. Each object is copied into the ledger's blob store under
its SHA-256 and checked against the index entry's sha256 and size where the
index has them. swamp's internal files (.lock, _catalog.db*, .namespace.json,
_index/, _control/, the sidecar and index names) are never imported.

--from takes the same URLs as --blobs; the URL's prefix is swamp's client
prefix. --filesystem DIR reads a swamp filesystem datastore (its data
directories: data, outputs, definitions-evaluated, workflows-evaluated,
workflow-runs, audit; never secrets or bundles); --repo DIR the datastore a
swamp repo's .swamp.yaml names. --namespace NS reads a namespaced datastore
("NS/…" keys).

Import is resumable and idempotent: run it again after an interruption (even
kill -9) and it finishes the job without publishing anything twice. A partition
whose last import commit carries the fingerprint of its current source files is
skipped; otherwise only the difference is committed. Into a partition that
hosts have committed to (since its import, or before any: a datastore imported
after setup), the source's changes are merged file by file: what only the
source changed is taken, what only hosts changed is kept. A file both changed
stays the ledger's if swamp regenerates it (evaluated definitions, latest
markers); otherwise its partition is left untouched and reported as a conflict,
until a run with --keep-ledger keeps the ledger's versions.

A file whose object does not match its index entry is left out and reported,
unless --accept-mismatch imports the object's bytes. Progress goes to stderr,
the summary to stdout (--json for JSON). Exit 5 when some file was left out
(mismatch, missing object, invalid path, conflict).

The ledger must exist: create it with "syncledger init" first.`,
		Example: `  syncledger init --ledger prod --blobs s3://ledger-blobs/prod
  syncledger swamp import --ledger prod --from 's3://swamp-bucket/datastore?region=eu-west-1'
  syncledger swamp import --from gs://swamp-bucket/prefix --namespace team-a --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			given := 0
			for _, v := range []string{from, repo, fsDir} {
				if v != "" {
					given++
				}
			}
			if given != 1 {
				return usagef("give one swamp datastore to import: --from URL, --filesystem DIR, or --repo DIR (the datastore a swamp repo's .swamp.yaml names)")
			}
			var dirs bool
			if fsDir != "" {
				abs, err := filepath.Abs(fsDir)
				if err != nil {
					return usagef("--filesystem: %v", err)
				}
				from, dirs = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), true
			}
			if repo != "" {
				cur, err := swamp.ReadDatastore(repo)
				if err != nil {
					return usagef("--repo: %v", err)
				}
				if cur.Source == "" {
					return usagef("--repo: the datastore of %s is already %s: nothing to import", repo, cur.Type)
				}
				from, dirs = cur.Source, cur.Dirs
				if ns == "" {
					ns = cur.Namespace
				}
			}
			sum, err := a.swampImport(ctx, from, ns, dirs, swamp.ImportConfig{AcceptMismatch: acceptMismatch, KeepLedger: keepLedger, Parallel: parallel})
			if err != nil {
				if sum.Partitions > 0 {
					printImportSummary(a, sum)
				}
				return err
			}
			if asJSON {
				if err := a.printJSON(sum); err != nil {
					return err
				}
			} else {
				printImportSummary(a, sum)
			}
			if !sum.Complete() {
				err := errors.New("swamp import: some files were not imported (see the summary)")
				if len(sum.Collisions) > 0 {
					err = fmt.Errorf("swamp import: hosts and the source both changed %d files since the last import (see the summary); "+
						"run the import again with --keep-ledger to keep the ledger's versions of them and take the rest", len(sum.Collisions))
				}
				return withExitCode(exitSwampFindings, err)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&from, "from", "", "the swamp datastore: s3://BUCKET/PREFIX?…, gs://BUCKET/PREFIX or file:///DIR")
	fs.StringVar(&repo, "repo", "", "import the datastore a swamp repo's .swamp.yaml names (a filesystem datastore: its data directories only)")
	fs.StringVar(&ns, "namespace", "", "swamp namespace (giga-swamp mode): read NS/… keys")
	fs.StringVar(&fsDir, "filesystem", "", "a swamp filesystem datastore (swamp datastore setup filesystem --path DIR, or a repo's .swamp): its data directories only")
	fs.BoolVar(&keepLedger, "keep-ledger", false, "where hosts and the source both changed a file since the last import, keep the ledger's")
	fs.BoolVar(&acceptMismatch, "accept-mismatch", false, "import an object's bytes even when they do not match its index entry's sha256 or size")
	fs.IntVar(&parallel, "parallel", swamp.DefaultParallel, "concurrent object copies")
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}

// swampImport imports the swamp datastore at from into a's ledger (a
// filesystem datastore's data directories only, with dirs), reporting each
// partition on stderr.
func (a *app) swampImport(ctx context.Context, from, ns string, dirs bool, opts swamp.ImportConfig) (swamp.ImportSummary, error) {
	src, err := a.openBucket(ctx, from, ledger.RetryPolicy{})
	if err != nil {
		return swamp.ImportSummary{}, err
	}
	if dirs {
		prefix := ""
		if ns != "" {
			prefix = ns + "/"
		}
		src = swamp.OnlyDatastoreDirs(src, prefix)
	}
	l, err := a.Log(ctx)
	if err != nil {
		return swamp.ImportSummary{}, err
	}
	blobs, err := a.Blobs(ctx)
	if err != nil {
		return swamp.ImportSummary{}, err
	}
	opts.Source, opts.Namespace, opts.SourceName, opts.Log, opts.Blobs, opts.Host = src, ns, redactURL(from), l, blobs, a.host
	opts.TempDir = os.TempDir()
	opts.Progress = func(p swamp.ImportProgress) {
		line := fmt.Sprintf("swamp import: [%d/%d] %s: %s, %d files (%s)", p.Done, p.Total, p.Partition, p.Action, p.Files, humanBytes(p.Bytes))
		if p.Action == swamp.Committed {
			line += fmt.Sprintf(": commit %s at seq %d writes %d, deletes %d", p.Commit, p.Seq, p.Written, p.Deleted)
		}
		if p.Copied > 0 {
			line += fmt.Sprintf(", copied %d objects (%s)", p.Copied, humanBytes(p.CopiedBytes))
		}
		fmt.Fprintln(a.stderr, line)
	}
	return swamp.Import(ctx, opts)
}

func printImportSummary(a *app, s swamp.ImportSummary) {
	w := a.stdout
	fmt.Fprintf(w, "swamp import of %s", s.Source)
	if s.Namespace != "" {
		fmt.Fprintf(w, " (namespace %s)", s.Namespace)
	}
	fmt.Fprintf(w, ": %s", s.Format)
	if s.Format == swamp.FormatV2 {
		fmt.Fprintf(w, " (commitSeq %d)", s.CommitSeq)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  partitions: %d (%d committed, %d already in the ledger, %d conflicts)\n",
		s.Partitions, s.Committed, s.Unchanged, len(s.Conflicts))
	fmt.Fprintf(w, "  files:      %d (%s); %d objects copied (%s)\n", s.Files, humanBytes(s.Bytes), s.Copied, humanBytes(s.CopiedBytes))
	fmt.Fprintf(w, "  skipped internal files: %d\n", len(s.Internal))
	listSome(a, s.Internal, 10)
	if len(s.Namespaces) > 0 {
		fmt.Fprintf(w, "  skipped other namespaces: %v (use --namespace)\n", s.Namespaces)
	}
	fmt.Fprintf(w, "  mismatches: %d\n", len(s.Mismatches))
	var mm []string
	for _, m := range s.Mismatches {
		what := "left out"
		if m.Imported {
			what = "imported as stored"
		}
		mm = append(mm, fmt.Sprintf("%s: index says %d bytes sha256 %s, object has %d bytes sha256 %s (%s)",
			m.Path, m.WantSize, orNone(m.WantSHA256), m.GotSize, m.GotSHA256, what))
	}
	listSome(a, mm, 10)
	if len(s.Missing) > 0 {
		fmt.Fprintf(w, "  missing objects (indexed, not stored): %d\n", len(s.Missing))
		listSome(a, s.Missing, 10)
	}
	if len(s.Invalid) > 0 {
		fmt.Fprintf(w, "  paths the ledger cannot hold: %d\n", len(s.Invalid))
		listSome(a, s.Invalid, 10)
	}
	if len(s.KeptLedger) > 0 {
		fmt.Fprintf(w, "  kept the ledger's (changed by hosts and the source; swamp regenerates them, or --keep-ledger): %d\n", len(s.KeptLedger))
		listSome(a, s.KeptLedger, 10)
	}
	if len(s.Conflicts) > 0 {
		fmt.Fprintf(w, "  conflicts (partitions left untouched: hosts and the source both changed these files): %d\n", len(s.Conflicts))
		listSome(a, s.Collisions, 10)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
