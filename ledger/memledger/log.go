package memledger

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Log is an in-memory ledger.CommitLog: the portable ledger.Log over an
// in-memory driver that keeps the stream as JetStream keeps it (one message
// per event on its partition's subject, gapless seqs from 1, the
// per-subject compare-and-append, deduplication by message id, quarantine
// notices on their reserved subject, truncation that keeps each partition's
// head), decoded by ledger.MessageReader as the adapter's messages are.
//
// Knobs a test may turn: LoseAck (an append stored whose answer is lost),
// Publish (a raw message, as a credential that may publish on a subject could
// store) and Rewind (a server restored from an older backup).
type Log struct {
	*ledger.Log
	d *logDriver

	// LoseAck, when set, is asked after every stored append; true makes that
	// Append return an error wrapping ledger.ErrOutcomeUnknown although the
	// events are stored (a lost acknowledgement). Appending the same events
	// again returns their seqs, as the adapter's retry does.
	LoseAck func() bool
}

// logDriver is the in-memory ledger.LogDriver under Log.
type logDriver struct {
	info ledger.Info
	now  func() time.Time

	// loseAck is Log.LoseAck's (false while unset).
	loseAck func() bool

	mu      sync.Mutex
	first   ledger.Seq
	msgs    []msg                   // msgs[i] has seq first+i; a purged one has dropped set
	subject map[string]ledger.Seq   // last seq of each subject (quarantined messages too)
	bySubj  map[string][]ledger.Seq // each subject's seqs, ascending (the per-subject index)
	ids     map[string]ledger.Seq   // message id → seq
	q       map[ledger.Seq]ledger.Quarantine
	att     ledger.Attestations
	grew    chan struct{} // closed and replaced when a message is stored
	stored  uint64        // messages stored, ever (Head's stamps)
}

type msg struct {
	subject string
	data    []byte
	dropped bool
	stamp   uint64 // Head's stamp: the log's count of messages stored when it was
}

var (
	_ ledger.CommitLog = (*Log)(nil)
	_ ledger.LogDriver = (*logDriver)(nil)
)

// New returns an empty log of the ledger info describes (Name required; a
// new lineage if UUID is empty; Format defaults to ledger.FormatVersion,
// Replicas to 1). now is the clock of quarantine notices (time.Now if nil).
func New(info ledger.Info, now func() time.Time) (*Log, error) {
	if err := ledger.ValidateName(info.Name); err != nil {
		return nil, err
	}
	if info.UUID == "" {
		id, err := ledger.NewLineageID(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("memledger: new lineage: %w", err)
		}
		info.UUID = id
	}
	if info.Format == 0 {
		info.Format = ledger.LogFormat
	}
	if err := ledger.CheckLogFormat(info.Format); err != nil {
		return nil, fmt.Errorf("memledger: %w", err)
	}
	info.Replicas = max(info.Replicas, 1)
	if now == nil {
		now = time.Now
	}
	d := &logDriver{
		info: info, now: now, first: 1,
		subject: map[string]ledger.Seq{}, bySubj: map[string][]ledger.Seq{}, ids: map[string]ledger.Seq{}, q: map[ledger.Seq]ledger.Quarantine{},
		grew: make(chan struct{}),
	}
	l := &Log{Log: ledger.NewLog(d), d: d}
	d.loseAck = func() bool { return l.LoseAck != nil && l.LoseAck() }
	return l, nil
}

// UUID returns the ledger's lineage.
func (l *Log) UUID() string { return l.d.info.UUID }

// Rewind drops every message after seq to: the log a server holds once
// restored from a backup taken when its last seq was to (the messages, their
// subjects' indexes, the message ids it deduplicates and the quarantine
// notices after to are gone; attestations are kept, as the stream's metadata
// of a backup of that time would hold them). A test knob.
func (l *Log) Rewind(to ledger.Seq) { l.d.rewind(to) }

// Publish stores a raw message on subject, unchecked — what a credential
// allowed to publish there could store — and returns its seq. For tests of
// readers that meet a bad message.
func (l *Log) Publish(subject string, data []byte) ledger.Seq { return l.d.publish(subject, data) }

func (l *logDriver) last() ledger.Seq { return l.first + ledger.Seq(len(l.msgs)) - 1 }

// at returns the message at seq; false if the log does not hold it.
func (l *logDriver) at(seq ledger.Seq) (msg, bool) {
	if seq < l.first || seq > l.last() {
		return msg{}, false
	}
	m := l.msgs[seq-l.first]
	return m, !m.dropped
}

// store appends messages with their ids; the caller holds mu.
func (l *logDriver) store(subjects []string, data [][]byte, ids []string) []ledger.Seq {
	seqs := make([]ledger.Seq, len(subjects))
	for i := range subjects {
		l.stored++ // never reset: a message stored after a Rewind has a stamp of its own
		l.msgs = append(l.msgs, msg{subject: subjects[i], data: data[i], stamp: l.stored})
		seqs[i] = l.last()
		l.subject[subjects[i]] = seqs[i]
		l.bySubj[subjects[i]] = append(l.bySubj[subjects[i]], seqs[i])
		if ids[i] != "" {
			l.ids[ids[i]] = seqs[i]
		}
	}
	close(l.grew)
	l.grew = make(chan struct{})
	return seqs
}

func (l *logDriver) reader() *ledger.MessageReader {
	return &ledger.MessageReader{Name: l.info.Name, UUID: l.info.UUID, Quarantined: maps.Clone(l.q)}
}

func (l *logDriver) fail(op string, err error) error {
	return fmt.Errorf("ledger %q %s: %w", l.info.Name, op, err)
}

// Info returns the ledger's settings.
func (l *logDriver) Info() ledger.Info { return l.info }

// LastSeq returns the log's last seq.
func (l *logDriver) LastSeq(ctx context.Context) (ledger.Seq, error) {
	b, err := l.Bounds(ctx)
	return b.Last, err
}

// Bounds returns the first and last seq ({1, 0} when empty).
func (l *logDriver) Bounds(ctx context.Context) (ledger.Bounds, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := l.first
	for first <= l.last() && l.msgs[first-l.first].dropped {
		first++
	}
	return ledger.Bounds{First: first, Last: l.last()}, nil
}

// Head returns the log's last seq, answered now by the log itself (an
// in-memory log has no mirror: every head is the origin's), with the stamp of
// the message there (the log's count of messages stored when it was, which a
// Rewind does not reset) and the commit id there when asked for and the
// message is an event.
func (l *logDriver) Head(ctx context.Context, req ledger.HeadRequest) (ledger.Head, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := ledger.Head{Seq: l.last(), AsOf: l.now()}
	if m, ok := l.at(h.Seq); ok {
		h.Stamp = strconv.FormatUint(m.stamp, 10)
		if req.Commit {
			if r, err := l.reader().Record(h.Seq, m.subject, m.data); err == nil && r.Skip == nil {
				h.Commit = r.Event.Commit
			}
		}
	}
	return h, nil
}

// PartitionLastSeq returns the seq of the partition subject's last message.
func (l *logDriver) PartitionLastSeq(ctx context.Context, partition string) (ledger.Seq, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.subject[ledger.Subject(l.info.Name, partition)], nil
}

// PartitionTip returns the partition's last seq and the commit there; see
// ledger.CommitLog.
func (l *logDriver) PartitionTip(ctx context.Context, partition string) (ledger.Seq, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := l.subject[ledger.Subject(l.info.Name, partition)]
	m, ok := l.at(seq)
	if !ok {
		return seq, "", nil
	}
	return seq, ledger.CommitOf(l.info.Name, l.info.UUID, seq, m.subject, m.data), nil
}

// PartitionHead returns the partition's last event; ErrNotFound if none.
func (l *logDriver) PartitionHead(ctx context.Context, partition string) (ledger.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	subj := ledger.Subject(l.info.Name, partition)
	rd := l.reader()
	seqs := l.bySubj[subj]
	for i := len(seqs) - 1; i >= 0; i-- {
		seq := seqs[i]
		m, ok := l.at(seq)
		if !ok {
			continue
		}
		r, err := rd.Record(seq, m.subject, m.data)
		if err != nil || r.Skip == nil {
			return r, err
		}
	}
	return ledger.Record{}, l.fail(fmt.Sprintf("partition %q head", partition), fmt.Errorf("no events: %w", ledger.ErrNotFound))
}

// CommitAt returns the commit id of the event stored at seq; see
// ledger.CommitLog.
func (l *logDriver) CommitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.at(seq)
	if !ok {
		return "", l.fail(fmt.Sprintf("commit at seq %d", seq), fmt.Errorf("no message: %w", ledger.ErrNotFound))
	}
	return ledger.CommitOf(l.info.Name, l.info.UUID, seq, m.subject, m.data), nil
}

// rewind is Log.Rewind.
func (l *logDriver) rewind(to ledger.Seq) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if to >= l.last() {
		return
	}
	if to < l.first-1 {
		to = l.first - 1
	}
	l.msgs = l.msgs[:to+1-l.first]
	clear(l.subject)
	for subj, seqs := range l.bySubj {
		i := len(seqs)
		for i > 0 && seqs[i-1] > to {
			i--
		}
		if i == 0 {
			delete(l.bySubj, subj)
			continue
		}
		l.bySubj[subj] = seqs[:i]
		l.subject[subj] = seqs[i-1]
	}
	for id, seq := range l.ids {
		if seq > to {
			delete(l.ids, id)
		}
	}
	// The notices still held, read again (the first of a seq wins).
	clear(l.q)
	rd := &ledger.MessageReader{Name: l.info.Name, UUID: l.info.UUID}
	for _, seq := range l.bySubj[ledger.QuarantineSubject(l.info.Name)] {
		m, ok := l.at(seq)
		if !ok {
			continue
		}
		if q, ok := rd.NoticeOf(seq, m.subject, m.data); ok {
			if _, dup := l.q[q.Seq]; !dup {
				l.q[q.Seq] = q
			}
		}
	}
}

// Append stores one commit's events atomically, each extending its
// partition's chain, and its fence checks after them, each while its fence
// is its lock's last fence record; see ledger.CommitLog.
func (l *logDriver) Append(ctx context.Context, b *ledger.AppendBatch) ([]ledger.Seq, error) {
	events, fences, subjects := b.Events, b.Fences, b.Subjects
	k, id := len(events), b.Commit
	ids := make([]string, len(subjects))
	for i := range events {
		ids[i] = fmt.Sprintf("%s/%d", id, i+1)
	}
	for i := range fences {
		ids[k+i] = ledger.FenceCheckID(id, i)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s1, ok := l.ids[ids[0]]; ok { // a retry of a stored commit
		seqs := make([]ledger.Seq, k)
		for i := range seqs {
			seqs[i] = s1 + ledger.Seq(i)
		}
		return seqs, nil
	}
	// A lost lock first: the commit is not to be retried.
	for _, f := range fences {
		if last := l.subject[ledger.FenceSubject(l.info.Name, f.Lock)]; last != f.Seq {
			return nil, fmt.Errorf("ledger %q append commit %s: %w", l.info.Name, id, l.lockLost(f, last))
		}
	}
	for i, e := range events {
		if last := l.subject[subjects[i]]; last != e.Prev && !l.onlyQuarantinedAfter(subjects[i], e.Prev, last) {
			return nil, &ledger.ConflictError{Partition: e.Partition, Expected: e.Prev, Actual: last}
		}
	}
	seqs := l.store(subjects, b.Data, ids)[:k]
	if l.loseAck() {
		return nil, fmt.Errorf("ledger %q append commit %s: the answer was lost: %w", l.info.Name, id, ledger.ErrOutcomeUnknown)
	}
	return seqs, nil
}

// lockLost is the error of fence f whose lock's last fence record is at last
// (the caller holds mu).
func (l *logDriver) lockLost(f ledger.Fence, last ledger.Seq) *ledger.LockLostError {
	e := &ledger.LockLostError{Lock: f.Lock, Fence: f.Seq, Last: last}
	if m, ok := l.at(last); ok {
		if r, err := ledger.DecodeFenceRecord(m.data); err == nil {
			e.Taker = &r
		}
	}
	return e
}

// TakeFence stores rec on its lock's fence subject and returns its seq; see
// ledger.CommitLog.
func (l *logDriver) TakeFence(ctx context.Context, rec ledger.FenceRecord, b []byte) (ledger.Seq, error) {
	id := ledger.FenceRecordID(rec)
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq, ok := l.ids[id]; ok {
		return seq, nil
	}
	seq := l.store([]string{ledger.FenceSubject(l.info.Name, rec.Lock)}, [][]byte{b}, []string{id})[0]
	if l.loseAck() {
		return 0, fmt.Errorf("ledger %q take fence of lock %q: the answer was lost: %w", l.info.Name, rec.Lock, ledger.ErrOutcomeUnknown)
	}
	return seq, nil
}

// onlyQuarantinedAfter reports whether subj holds, after prev and up to last,
// only quarantined messages: they are no part of the chain, so an event whose
// Prev is prev still extends it (the adapter's skipQuarantined).
func (l *logDriver) onlyQuarantinedAfter(subj string, prev, last ledger.Seq) bool {
	if last < prev {
		return false
	}
	seqs := l.bySubj[subj]
	i, _ := slices.BinarySearch(seqs, prev+1)
	for _, seq := range seqs[i:] {
		if _, q := l.q[seq]; !q && seq <= last {
			return false
		}
	}
	return true
}

// publish is Log.Publish.
func (l *logDriver) publish(subject string, data []byte) ledger.Seq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.store([]string{subject}, [][]byte{data}, []string{""})[0]
}

// Driver returns the driver under the log, for ledger/drivertest's suite,
// which runs on a portable ledger.Log of its own over it.
func (l *Log) Driver() ledger.LogDriver { return l.d }
