package projector

import (
	"fmt"

	"github.com/syncledger/syncledger/ledger"
)

// Fences in the simulator (ledger.Fence, simConfig.fences): records of no
// partition that no reader applies, as natsjs.Log hands them out —
//
//   - fence records: another host took a lock (fenceStep);
//   - fence checks: a fenced commit's batch ends with one per fence, right
//     after its events, remote writers' (fenceStep) and hosts' own commits
//     (ownCommit, after the host took its locks: takeLocks) alike; the host's
//     own commit counts its checks and its own fence records as processed
//     (RecordOwn's fences).
//
// Hosts, rebuilds and the uninterrupted host must all skip them and let the
// HWM pass them; they are part of no chain and no commit. Whether a lock was
// lost is the log's to decide at the append, not the core's: the simulator's
// fences always hold.

// simFenceLock is the lock the simulator's fences name.
const simFenceLock = "data/sim/.lock"

// fenceStep is another host taking the lock (a fence record), or a remote
// writer's commit under it (its events, then its fence checks).
func (s *sim) fenceStep() error {
	if s.r.IntN(2) == 0 {
		seq := s.log.fenceRecord("writer", simFenceLock)
		s.logf("writer takes lock %s: fence record at seq %d", simFenceLock, seq)
		s.stats["fence record"]++
		return nil
	}
	head := map[string]bool{}
	for p := range s.log.heads {
		for path := range s.log.filesAt(p, 0) {
			head[path] = true
		}
	}
	content := map[ledger.Digest]string{}
	es := s.changes(func(p string) bool { return head[p] }, content)
	for d, c := range content {
		s.log.blobs[d] = c // content first
	}
	evs, err := CommitEvents(s.log.info.UUID, s.log.mark, s.log.newCommit("writer", es))
	if err != nil {
		return err
	}
	seqs, err := s.log.appendFenced(evs, false, 1+s.r.IntN(2))
	s.logf("writer commits seqs %v under its fences", seqs)
	s.stats["fenced remote commit"]++
	return err
}

// fenceRecord appends a fence record of the simulator's lock by host.
func (l *simLog) fenceRecord(host, lock string) ledger.Seq {
	seq := l.head() + 1
	l.recs = append(l.recs, ledger.Record{
		Seq: seq,
		// Event is the checker's view (I7: a commit of its own, no
		// partition); the core reads only Skip, as for a quarantine notice.
		Event: ledger.Event{Ledger: l.info.UUID, Commit: fmt.Sprintf("fence-%d", seq), Part: 1, Parts: 1},
		Skip:  &ledger.Skip{Fence: &ledger.FenceRecord{V: ledger.FormatVersion, Ledger: l.info.UUID, Lock: lock, Host: host, At: testTime}},
	})
	return seq
}

// appendFenced is appendCommit of a commit carrying fences fences: its fence
// checks are stored right after its events, in the same append (a retry
// stores nothing twice).
func (l *simLog) appendFenced(evs []ledger.Event, lose bool, fences int) ([]ledger.Seq, error) {
	if seqs, ok := l.commitAt[evs[0].Commit]; ok {
		return seqs, nil // a retry: deduplicated
	}
	seqs, err := l.memLog.append(evs)
	if err != nil {
		return nil, err
	}
	l.commitAt[evs[0].Commit] = seqs
	for i := range fences {
		seq := l.head() + 1
		l.recs = append(l.recs, ledger.Record{
			Seq:   seq,
			Event: ledger.Event{Ledger: l.info.UUID, Commit: fmt.Sprintf("fence-check-%d", seq), Part: 1, Parts: 1},
			Skip: &ledger.Skip{Check: &ledger.FenceCheck{V: ledger.FormatVersion, Ledger: l.info.UUID, Commit: evs[0].Commit,
				Lock: fmt.Sprintf("%s/%d", simFenceLock, i), Fence: 1}},
		})
	}
	if lose {
		return nil, errLostAck
	}
	return seqs, nil
}

// takeLocks is host h taking n locks before it commits: each a fence
// record of its own in the log, whose seq is its fence (the simulator's
// fences hold).
func (s *sim) takeLocks(h *simHost, n int) []ledger.Fence {
	out := make([]ledger.Fence, n)
	for i := range out {
		lock := fmt.Sprintf("%s/%d", simFenceLock, i)
		seq := s.log.fenceRecord(h.name, lock)
		s.logf("%s takes lock %s: fence record at seq %d", h.name, lock, seq)
		out[i] = ledger.Fence{Lock: lock, Seq: seq}
	}
	return out
}
