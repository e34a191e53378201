package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

func newStatusCmd(a *app) *cobra.Command {
	var asJSON, ignored bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show this host's high-water mark, partitions and uncommitted changes",
		Long: `Status compares this host's cache with the ledger: the stream head, the host's
high-water mark (every commit up to it is applied here), how far behind it is, the
mark of every partition it holds, the files changed locally and not committed, and
how many files are held as metadata only (lazy). --ignored also lists the files
the ignore rules leave out (the defaults and .syncledgerignore, see the README): an
ignored directory is listed once, with a trailing /.

A server whose disk is full (it refuses every write until space is freed
there) is shown first, with what it says of its disk.

With the server unreachable, status shows what the cache alone knows — its
ledger, high-water mark, partitions, uncommitted and ignored files — with a
first line saying so (--json: "offline": true, "unreachable": why), and exits
0: what the cache holds may be stale.

A cache whose ledger lost commits it applied (its server restored from an older
backup) is shown as FORKED, never as behind 0: the next sync republishes them.

Status also checks what the server lets this user do: permissions older or
wider than this build's (a server configured before this release) are
reported on stderr, with the command that renders them again.

--json prints: ledger, uuid, host, cache, head, first, snapshot, hwm, behind,
forked {seq, want, got, head, hwm} (when forked),
partitions {key: {modelSeq, seq}}, dirty [paths], ignored [paths], lazy, files,
shadowed [paths], conflicts [paths], server {full, dir, free, size, reserve,
resume, stored, since, cause}.

Conflicts are dirty files the ledger changed too since this host synced them:
'syncledger resolve' settles them. Shadowed files are indexed files the cache
does not hold because a directory of the same name holds other paths (two hosts
committed a file and a path under it at once; the directory wins): each comes
back when the last path under it goes, and 'replay' writes them under
.syncledger-shadowed/.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runStatus(cmd.Context(), a, asJSON, ignored) },
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	cmd.Flags().BoolVar(&ignored, "ignored", false, "also list the ignored files")
	return cmd
}

// offlineStatus is status --json when the server cannot be reached.
type offlineStatus struct {
	host.Status
	Unreachable string `json:"unreachable"` // why the ledger was not read
}

// onlineStatus is status --json when the server answered.
type onlineStatus struct {
	host.Status
	Server *ledger.ServerState `json:"server,omitempty"` // nil: the server did not say
}

func runStatus(ctx context.Context, a *app, asJSON, ignored bool) error {
	h, err := a.ExistingHost(ctx)
	var unreachable *unreachableError
	if errors.As(err, &unreachable) {
		// What the cache alone knows: its uncommitted files above all.
		a.logger.Warn("the NATS server is unreachable: showing what the cache knows", "err", unreachable.err)
		h, err = a.LocalHost()
	}
	if err != nil {
		return err
	}
	st, err := h.Status(ctx)
	if err != nil {
		return err
	}
	var server *ledger.ServerState
	if !st.Offline {
		server = a.serverState(ctx)
		if p := a.permissionProblem(ctx); p != "" {
			a.logger.Warn(p)
		}
	}
	if asJSON {
		if st.Offline {
			return a.printJSON(offlineStatus{st, unreachable.Error()})
		}
		return a.printJSON(onlineStatus{st, server})
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	if st.Offline {
		fmt.Fprintf(w, "server\tunreachable: %v\n", unreachable.err)
	}
	if server != nil && server.Full {
		fmt.Fprintf(w, "server\tDISK FULL, refusing writes: %s\n", server)
	}
	fmt.Fprintf(w, "ledger\t%s (%s)\n", st.Ledger, st.UUID)
	fmt.Fprintf(w, "host\t%s\n", st.Host)
	fmt.Fprintf(w, "cache\t%s\n", st.Cache)
	if st.Offline {
		fmt.Fprintf(w, "head\tunknown (server unreachable)\n")
		fmt.Fprintf(w, "hwm\t%d (what this cache holds, which may be stale: commits after it are not known here)\n", st.HWM)
	} else {
		fmt.Fprintf(w, "head\t%d (first %d)\n", st.Head, st.First)
		if st.Source != nil && !st.Source.FromOrigin() {
			// Read through a mirror (--read-nats): how stale the head may be.
			fmt.Fprintf(w, "head from\t%s\n", st.Source.Describe(time.Now()))
		}
		if st.Snapshot > 0 {
			fmt.Fprintf(w, "snapshot\t%d\n", st.Snapshot)
		} else {
			fmt.Fprintf(w, "snapshot\tnone\n")
		}
		fmt.Fprintf(w, "hwm\t%d\n", st.HWM)
		if st.Forked != nil {
			fmt.Fprintf(w, "behind\tFORKED: %v\n", st.Forked)
			fmt.Fprintf(w, "\tthe next sync (or swamp pull) rebuilds this cache from the ledger and republishes what it lost; it deletes nothing\n")
		} else {
			fmt.Fprintf(w, "behind\t%d\n", st.Behind)
		}
	}
	fmt.Fprintf(w, "files\t%d (%d lazy)\n", st.Files, st.Lazy)
	fmt.Fprintf(w, "dirty\t%d\n", len(st.Dirty))
	w.Flush()
	if len(st.Partitions) > 0 {
		fmt.Fprintln(a.stdout, "\npartitions:")
		w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "  PARTITION\tMODELSEQ\tSEQ")
		keys := make([]string, 0, len(st.Partitions))
		for k := range st.Partitions {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := st.Partitions[k]
			fmt.Fprintf(w, "  %s\t%d\t%d\n", k, p.ModelSeq, p.Seq)
		}
		w.Flush()
	}
	if len(st.Dirty) > 0 {
		fmt.Fprintln(a.stdout, "\nuncommitted changes:")
		printPaths(a, st.Dirty)
	}
	if len(st.Conflicts) > 0 {
		fmt.Fprintln(a.stdout, "\nconflicts (changed here and in the ledger):")
		printPaths(a, st.Conflicts)
		fmt.Fprintf(a.stdout, "  take the ledger's:   syncledger resolve --theirs PATH… (or --all; this host's copy is kept under %s/%s/)\n", ledger.StateDir, host.ConflictsDir)
		fmt.Fprintln(a.stdout, "  keep this host's:    syncledger resolve --mine PATH… (or --all; committed on top)")
	}
	if len(st.Shadowed) > 0 {
		fmt.Fprintln(a.stdout, "\nshadowed (a directory of the same name wins; see 'syncledger replay'):")
		printPaths(a, st.Shadowed)
	}
	if len(st.Quarantined) > 0 {
		seqs := make([]string, len(st.Quarantined))
		for i, q := range st.Quarantined {
			seqs[i] = fmt.Sprint(q)
		}
		fmt.Fprintf(a.stdout, "\nquarantined seqs (every reader skips them; 'syncledger quarantine --list'): %s\n", strings.Join(seqs, ", "))
	}
	if ignored && len(st.Ignored) > 0 {
		fmt.Fprintln(a.stdout, "\nignored:")
		printPaths(a, st.Ignored)
	}
	return nil
}
