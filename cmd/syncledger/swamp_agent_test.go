package main

import "testing"

// The agent's ways out: the CLI's resolve commands, pointed at its cache and
// ledger; setup's command line, quoted.
func TestSwampWaysOut(t *testing.T) {
	t.Parallel()
	w := swampWaysOut{globals: "--nats nats://h:4222 --ledger swamp --cache /c"}
	mine, theirs := w.Resolve([]string{"data/a b", "x"})
	if want := "syncledger --nats nats://h:4222 --ledger swamp --cache /c resolve --mine 'data/a b' x"; mine != want {
		t.Errorf("mine = %q, want %q", mine, want)
	}
	if want := "syncledger --nats nats://h:4222 --ledger swamp --cache /c resolve --theirs 'data/a b' x"; theirs != want {
		t.Errorf("theirs = %q, want %q", theirs, want)
	}
	if got, want := w.Setup("/my repo", "ci"), "syncledger swamp setup --repo '/my repo' --namespace ci"; got != want {
		t.Errorf("setup = %q, want %q", got, want)
	}
	if got, want := w.Setup("/r", ""), "syncledger swamp setup --repo /r"; got != want {
		t.Errorf("setup without a namespace = %q, want %q", got, want)
	}
}
