package projector

import (
	"errors"
	"fmt"
	"maps"

	"github.com/syncledger/syncledger/ledger"
)

// simLog is the simulator's log: memLog (gapless seqs, the chain checked at
// append, atomic commits, a blob store) plus the faults of a real deployment:
//
//   - dedupe: an append of a commit id already stored returns its seqs and
//     stores nothing (Nats-Msg-Id, and natsjs.Append's resolution);
//   - lost acks: an append is stored but its answer is lost (errLostAck);
//   - snapshots at commit boundaries, and retention: events below the newest
//     snapshot are purged, except each partition's last event
//     (ledger.CommitLog.TruncateBefore); a read that needs a purged event fails with
//     ledger.ErrTruncated, never a silent skip;
//   - content first: entries' blobs are stored by upload, before the append;
//     the I6 checker reads what was stored.
type simLog struct {
	*memLog
	gone      map[ledger.Seq]bool // purged seqs
	purgedTo  ledger.Seq          // every seq < purgedTo not a kept head is gone
	commitAt  map[string][]ledger.Seq
	snapshots []simSnapshot
	folds     map[foldKey]map[string]ledger.Entry // memoized filesAt
}

type foldKey struct {
	p    string
	upto ledger.Seq
}

// simSnapshot is the ledger's index at a commit boundary, as a snapshot stores it.
type simSnapshot struct {
	seq   ledger.Seq
	marks map[string]Mark
	files map[string]ledger.Entry
}

// errLostAck: the append was stored, its acknowledgement lost.
var errLostAck = errors.New("publish ack lost")

func newSimLog() *simLog {
	return &simLog{
		memLog:   newMemLog(testLedger),
		gone:     map[ledger.Seq]bool{},
		commitAt: map[string][]ledger.Seq{},
		folds:    map[foldKey]map[string]ledger.Entry{},
	}
}

// appendCommit appends evs with dedupe by commit id; lose makes the answer an
// errLostAck although the events are stored. (appendFenced: with fences.)
func (l *simLog) appendCommit(evs []ledger.Event, lose bool) ([]ledger.Seq, error) {
	return l.appendFenced(evs, lose, 0)
}

// commitRemote is memLog.commitRemote through appendCommit.
func (l *simLog) commitRemote(host string, entries []ledger.Entry) ([]ledger.Seq, error) {
	evs, err := CommitEvents(l.info.UUID, l.mark, l.newCommit(host, entries))
	if err != nil {
		return nil, err
	}
	return l.appendCommit(evs, false)
}

// truncated is the error a read that needs purged seq s fails with.
func (l *simLog) truncated(s ledger.Seq) error {
	return fmt.Errorf("seq %d purged: %w", s, &ledger.TruncatedError{From: s, First: l.purgedTo})
}

// readSafe is read with the purge checked: any purged seq in [from, to] fails.
func (l *simLog) readSafe(from, to ledger.Seq) ([]ledger.Record, error) {
	recs := l.memLog.read(from, to)
	for _, r := range recs {
		if l.gone[r.Seq] {
			return nil, l.truncated(r.Seq)
		}
	}
	return recs, nil
}

// readPartitionSafe is readPartition with the purge checked.
func (l *simLog) readPartitionSafe(p string, from, to ledger.Seq) ([]ledger.Record, error) {
	recs := l.memLog.readPartition(p, from, to)
	for _, r := range recs {
		if l.gone[r.Seq] {
			return nil, l.truncated(r.Seq)
		}
	}
	return recs, nil
}

// filesAt is memLog.filesAt, memoized (the history never changes; the purge
// only makes it unreadable).
func (l *simLog) filesAt(p string, upto ledger.Seq) map[string]ledger.Entry {
	if upto == 0 || upto > l.head() {
		upto = l.head()
	}
	// The fold only changes at the partition's own events: key it by the last one.
	k := foldKey{p, 0}
	for s := upto; s >= 1; s-- {
		if l.rec(s).Event.Partition == p {
			k.upto = s
			break
		}
	}
	if f, ok := l.folds[k]; ok {
		return f
	}
	f := l.memLog.filesAt(p, k.upto)
	l.folds[k] = f
	return f
}

// takeSnapshot records the ledger's index at the head (a commit boundary:
// appends are atomic).
func (l *simLog) takeSnapshot() simSnapshot {
	sn := simSnapshot{seq: l.head(), marks: maps.Clone(l.heads), files: map[string]ledger.Entry{}}
	for p := range l.heads {
		maps.Copy(sn.files, l.filesAt(p, sn.seq))
	}
	l.snapshots = append(l.snapshots, sn)
	return sn
}

// newestSnapshot returns the newest snapshot, if any.
func (l *simLog) newestSnapshot() (simSnapshot, bool) {
	if len(l.snapshots) == 0 {
		return simSnapshot{}, false
	}
	return l.snapshots[len(l.snapshots)-1], true
}

// purge drops the events up to the newest snapshot's seq, keeping each
// partition's last event; it returns how many were dropped.
func (l *simLog) purge() int {
	sn, ok := l.newestSnapshot()
	if !ok {
		return 0
	}
	before := sn.seq + 1
	n := 0
	for s := ledger.Seq(1); s < before; s++ {
		r := l.rec(s)
		if l.gone[s] || l.heads[r.Event.Partition].Seq == s {
			continue
		}
		l.gone[s] = true
		n++
	}
	l.purgedTo = max(l.purgedTo, before)
	return n
}
