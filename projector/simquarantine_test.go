package projector

import (
	"fmt"

	"github.com/syncledger/syncledger/ledger"
)

// Quarantined seqs in the simulator: a message on a partition's subject that
// no reader applies (ledger.Skip), as natsjs.Log hands it out once an admin
// stored its quarantine notice. Hosts, rebuilds and the uninterrupted host must
// all skip it and let the HWM pass it; it is part of no chain (the partition's
// next event names the event before it as prev: natsjs.Log's Append expects
// the quarantined message on the server's side). The notice itself (a skipped
// record of no partition) is covered by TestSkippedRecords.
func init() { simExtraSteps = append(simExtraSteps, quarantineStep) }

func quarantineStep(s *sim, _ *simHost) error {
	p := s.partition(s.r.IntN(s.cfg.partitions))
	seq := s.log.quarantine(p)
	s.logf("a bad message on %s at seq %d, quarantined", p, seq)
	s.stats["quarantined seq"]++
	return nil
}

// quarantine appends a quarantined message on partition p's subject.
func (l *simLog) quarantine(p string) ledger.Seq {
	seq := l.head() + 1
	l.recs = append(l.recs, ledger.Record{
		Seq: seq,
		// Event is the checker's view (I7 reads it: a commit of its own; no
		// partition, so no partition read returns it). The core reads only
		// Skip, as the real log's skipped records carry no event.
		Event: ledger.Event{Ledger: l.info.UUID, Commit: fmt.Sprintf("quarantined-%d", seq), Part: 1, Parts: 1},
		Skip:  &ledger.Skip{Partition: p, Quarantine: ledger.Quarantine{V: ledger.FormatVersion, Ledger: l.info.UUID, Seq: seq, Reason: "sim", By: "admin", At: testTime}},
	})
	return seq
}
