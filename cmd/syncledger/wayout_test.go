package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/snapshot"
	"github.com/syncledger/syncledger/projector/statedb"
)

// TestWayOutTable: the libraries' typed errors, wrapped as commands wrap them,
// get their command lines and notes here (wayout.go), and the libraries'
// messages name no command line of their own.
func TestWayOutTable(t *testing.T) {
	t.Parallel()
	truncated := &ledger.TruncatedError{From: 1, First: 10}
	five := []string{"a/1", "a/2", "a/3", "a/4", "a/5"}
	for _, tc := range []struct {
		name string
		err  error
		want []string
		note string
	}{
		{"commit conflict", &host.ConflictError{Paths: []string{"p/shared", "p/it's"}}, []string{
			`syncledger resolve --mine p/shared 'p/it'\''s'`, `syncledger resolve --theirs p/shared 'p/it'\''s'`}, ""},
		{"local changes", &host.LocalChangesError{Paths: five}, []string{
			"syncledger commit", "syncledger resolve --mine --all", "syncledger resolve --theirs --all"}, ""},
		{"content gone, behind", &host.ContentGoneError{Paths: []string{"x"}, HWM: 3, Head: 5, Err: ledger.ErrNotFound}, []string{"syncledger sync --lazy"}, ""},
		{"content gone, at the head", &host.ContentGoneError{Paths: []string{"x"}, HWM: 5, Head: 5, Err: ledger.ErrNotFound}, []string{}, "see syncledger log"},
		{"no snapshot, one unreadable", &host.NoSnapshotError{Skipped: []string{"s1"}, Err: truncated}, []string{}, ""},
		{"no snapshot, one unattested", &host.NoSnapshotError{Skipped: []string{"s1", "s2"}, Unattested: []string{"s2"}, Err: truncated}, []string{
			"syncledger snapshot --adopt   (admin; makes the snapshots an older release took usable, then rebuild again)"}, ""},
		{"no snapshot, one unattested on a ledger that attests", &host.NoSnapshotError{Skipped: []string{"s2"}, Unattested: []string{"s2"}, Attests: true, Err: truncated}, []string{}, ""},
		{"no snapshot at all", &host.NoSnapshotError{Err: truncated}, []string{}, ""},
		{"no snapshot, a wrong retention bound", &host.NoSnapshotError{WrongBound: 10, Err: truncated}, []string{retentionBoundCommand}, ""},
		{"take under a wrong retention bound", &snapshot.WrongBoundError{Bound: 10, Err: truncated}, []string{retentionBoundCommand}, ""},
		{"truncated", truncated, []string{"syncledger rebuild"}, ""},
		{"damaged state", statedb.ErrCorrupt, []string{"syncledger rebuild"}, ""},
		{"applied quarantined", projector.ErrAppliedQuarantined, []string{"syncledger rebuild"}, ""},
		{"bad message", &ledger.RecordError{Seq: 7, Decoded: true, Err: ledger.ErrInvalid}, []string{
			"syncledger quarantine 7 --force --reason '…'   (admin; if the message at seq 7 is bad: every reader then skips it)"}, ""},
		{"no ledger", fmt.Errorf("open ledger %q: %w", "x", ledger.ErrNoLedger), []string{}, "create it with `syncledger init`"},
		{"resolve of no change", fmt.Errorf("resolve x: %w", host.ErrNoChange), []string{}, "'syncledger status' lists conflicts"},
		{"rewound", fmt.Errorf("sync: %w", ledger.ErrRewound), []string{rewoundCommand}, ""},
		{"forked: a commit on a ledger that lost what it applied", &host.ForkError{Seq: 202, Want: "a", Got: "b", Head: 202, HWM: 202}, []string{rewoundCommand}, ""},
		{"forked, and a message refused after it: never a quarantine", fmt.Errorf("%w: %w", &host.ForkError{Seq: 199, Head: 181, HWM: 199}, &ledger.RecordError{Seq: 199, Decoded: true, Err: ledger.ErrInvalid}), []string{rewoundCommand}, ""},
		{"server full", &ledger.ServerFullError{State: ledger.ServerState{Full: true, Dir: "/srv/sl", Free: 12 << 20, Reserve: 64 << 20, Resume: 96 << 20}}, []string{},
			"free 84.0 MiB on the disk of serve's data directory /srv/sl, then run this again: the server takes writes by itself once it has room, nothing to restart"},
		{"server full, the refusal alone", fmt.Errorf("put blob: %w", &ledger.ServerFullError{}), []string{},
			"free space on the disk of serve's data directory (its --data), or raise the store limit of a nats-server of your own, then run this again: the server takes writes by itself once it has room, nothing to restart"},
		{"cache full", &host.NoSpaceError{Dir: "/c", Free: 1 << 20, Need: 5 << 20, Files: 3, From: 4, To: 9, Err: syscall.ENOSPC}, []string{},
			"free up to 4.0 MiB on the disk of the cache /c (the rest of the pull is 5.0 MiB; 1.0 MiB is free), then sync again: what was applied is kept"},
		{"cache full, the pull's size unknown", &host.NoSpaceError{Dir: "/c", Err: syscall.ENOSPC}, []string{},
			"free space on the disk of the cache /c, then sync again: what was applied is kept"},
		{"plain", errors.New("boom"), []string{}, ""},
	} {
		err := fmt.Errorf("%s: %w", "cmd", tc.err)
		if got := errorCommands(err); !slices.Equal(got, tc.want) {
			t.Errorf("%s: commands %q, want %q", tc.name, got, tc.want)
		}
		if got := errorNote(err); got != tc.note {
			t.Errorf("%s: note %q, want %q", tc.name, got, tc.note)
		}
		if got := withNote(err); exitCode(got) != exitCode(err) || !strings.HasSuffix(got.Error(), tc.note+")") && tc.note != "" {
			t.Errorf("%s: withNote %v (exit %d, want %d)", tc.name, got, exitCode(got), exitCode(err))
		}
		if strings.Contains(tc.err.Error(), "syncledger ") {
			t.Errorf("%s: the library's message names a command line: %s", tc.name, tc.err)
		}
	}
}
