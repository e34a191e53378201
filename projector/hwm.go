package projector

import (
	"cmp"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// Done is one seq above the HWM that a full sync (or the host's own commit) has
// processed durably: its event is applied, or was skipped by rule 1 because it was
// applied before.
type Done struct {
	Seq       ledger.Seq
	CommitEnd bool // the event is the last part of its commit (Part == Parts)
}

// SafeHWM returns the largest H ≥ hwm such that every seq in (hwm, H] is in done
// and H is a commit end; hwm itself if there is none. It is the HWM rule as a pure
// function (the counterpart of raft's CommittedIndex): the HWM moves only over an
// unbroken run of processed seqs and stops at the last commit completed in it, so a
// commit whose last part has not been processed keeps the HWM before it.
//
// done may be in any order and hold duplicates and seqs ≤ hwm (ignored); a seq
// counts as a commit end if any of its elements says so. SafeHWM never returns
// less than hwm, and for growing done it never decreases.
func SafeHWM(hwm ledger.Seq, done []Done) ledger.Seq {
	above := make([]Done, 0, len(done))
	for _, d := range done {
		if d.Seq > hwm {
			above = append(above, d)
		}
	}
	slices.SortFunc(above, func(a, b Done) int { return cmp.Compare(a.Seq, b.Seq) })
	h, next := hwm, hwm+1
	for _, d := range above {
		switch d.Seq {
		case next:
			next++
		case next - 1: // a duplicate of the seq just taken
		default:
			return h // a hole at next
		}
		if d.CommitEnd {
			h = d.Seq
		}
	}
	return h
}
