package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/snapshot"
	"github.com/syncledger/syncledger/projector/statedb"
)

// What the user should do next, decided here alone, beside the exit-code
// table (exitcode.go). The libraries return typed errors that carry what is
// needed (paths, seqs, what was skipped) and name no command line; this file
// turns them into the command lines printed after the message ("  way out:
// …", and "commands" of the --json error object) and into the notes that point
// at a command showing more. Every way out printed here, followed as printed,
// must converge (TestWayOutsConverge and the tests of each way out).

// commander is an error of this command that names the commands leading out
// of it (auditGapError).
type commander interface{ Commands() []string }

// errorCommands returns the command lines that lead out of err ([] if none).
func errorCommands(err error) []string {
	var (
		hc *host.ConflictError
		lc *host.LocalChangesError
		cg *host.ContentGoneError
		ns *host.NoSnapshotError
		wb *snapshot.WrongBoundError
		re *ledger.RecordError
		ce *ledger.ConfigError
		c  commander
	)
	switch {
	case errors.As(err, &hc):
		return resolveCommands(hc.Paths)
	case errors.As(err, &lc):
		return append([]string{"syncledger commit"}, resolveCommands(lc.Paths)...)
	case errors.As(err, &cg):
		if !cg.Behind() {
			return []string{} // the content is lost: no command leads out on its own
		}
		// A sync (lazily, as the host synced) brings the current versions,
		// whose content the store keeps; the same fetch then works.
		return []string{"syncledger sync --lazy"}
	case errors.As(err, &ns) && ns.WrongBound > 0, errors.As(err, &wb):
		return []string{retentionBoundCommand}
	case errors.As(err, &ns):
		if len(ns.Unattested) == 0 || ns.Attests {
			// A rebuild again would fail the same way; adopting attests
			// nothing, or (a ledger that attests) what nobody vouches for.
			return []string{}
		}
		return []string{"syncledger snapshot --adopt   (admin; makes the snapshots an older release took usable, then rebuild again)"}
	case errors.As(err, &c):
		return c.Commands()
	case errors.Is(err, ledger.ErrRewound):
		// Never a quarantine: nothing is wrong with the ledger's messages.
		return []string{rewoundCommand}
	case errors.As(err, &ce) && strings.HasPrefix(ce.Repair, "run syncledger upgrade"):
		return []string{upgradeCommand}
	case errors.Is(err, projector.ErrAppliedQuarantined):
		return []string{"syncledger rebuild"}
	case errors.As(err, &re):
		return []string{quarantineCommand(re)}
	case errors.Is(err, ledger.ErrTruncated), errors.Is(err, statedb.ErrCorrupt):
		return []string{"syncledger rebuild"}
	case errors.Is(err, host.ErrLocalChanges):
		return []string{"syncledger commit"}
	}
	return []string{}
}

// rewoundCommand is the way out of a ledger that lost commits this cache
// applied: a sync heals the cache and republishes them (host/heal.go).
const rewoundCommand = "syncledger sync   (rebuilds this cache from the ledger and republishes the commits the ledger lost; deletes nothing)"

// upgradeCommand makes every resource of the ledger as this build makes it
// (natsjs's *ledger.ConfigError names it as its repair).
const upgradeCommand = "syncledger upgrade   (admin; makes the ledger's streams, buckets and dead letters as this release makes them)"

// retentionBoundCommand removes a retention bound the log contradicts
// (snapshot.WrongBound: the log holds every event below it).
const retentionBoundCommand = "syncledger snapshot --retention-bound 0   (admin; the log still holds every event below the bound it attests: rebuilds and snapshots then replay it whole)"

// errorNote returns what the message of err gains on the command line: a
// command that shows more, or one to run only after a judgement the command
// cannot make ("" if none).
func errorNote(err error) string {
	var (
		cg   *host.ContentGoneError
		full *ledger.ServerFullError
		ns   *host.NoSpaceError
		we   *host.WaitError
	)
	switch {
	case errors.As(err, &we):
		return fmt.Sprintf("%s: see that it is up and reachable from this host (a network cut, a proxy or endpoint that hangs), then run the command again; --wait sets how long a command waits", we.Left())
	case errors.As(err, &full):
		return serverFullNote(full.State)
	case errors.As(err, &ns):
		return cacheFullNote(ns)
	case errors.Is(err, ledger.ErrNoLedger):
		return "create it with `syncledger init`"
	case errors.Is(err, host.ErrNoChange):
		return "'syncledger status' lists conflicts"
	case errors.As(err, &cg) && !cg.Behind():
		return "see syncledger log"
	}
	return ""
}

// withNote returns err with its note (errorNote) appended to the message.
func withNote(err error) error {
	if n := errorNote(err); n != "" {
		return fmt.Errorf("%w (%s)", err, n)
	}
	return err
}

// resolveCommands returns the resolve command lines for paths: --mine, then
// --theirs (--all for more than four paths).
func resolveCommands(paths []string) []string {
	args := "--all"
	if len(paths) <= 4 {
		q := make([]string, len(paths))
		for i, p := range paths {
			q[i] = host.ShellQuote(p)
		}
		args = strings.Join(q, " ")
	}
	return []string{"syncledger resolve --mine " + args, "syncledger resolve --theirs " + args}
}

// quarantineCommand is the command line that quarantines the message of a
// reader stuck there.
func quarantineCommand(re *ledger.RecordError) string {
	force := ""
	if re.Decoded {
		force = "--force "
	}
	return fmt.Sprintf("syncledger quarantine %d %s--reason '…'   (admin; if the message at seq %d is bad: every reader then skips it)", re.Seq, force, re.Seq)
}

// unprotectedNote is what the warning of a blob store that does not protect
// stored blobs adds when an admin's init can fix it (a NATS bucket made
// without write-once).
const unprotectedNote = "run 'syncledger upgrade' as an admin to fix it"
