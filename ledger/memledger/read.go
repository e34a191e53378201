package memledger

import (
	"context"
	"fmt"
	"slices"

	"github.com/syncledger/syncledger/ledger"
)

// held returns the log's first held seq and its last seq; the caller holds mu.
func (l *logDriver) held() ledger.Bounds {
	first := l.first
	for first <= l.last() && l.msgs[first-l.first].dropped {
		first++
	}
	return ledger.Bounds{First: first, Last: l.last()}
}

// span returns a copy of the messages from..to (bounded by the log) and the
// reader of the quarantines as they are now.
func (l *logDriver) span(from, to ledger.Seq) ([]msg, *ledger.MessageReader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	to = min(to, l.last())
	if from > to {
		return nil, l.reader()
	}
	return append([]msg(nil), l.msgs[from-l.first:to-l.first+1]...), l.reader()
}

// Read calls fn for every record with from ≤ seq ≤ to (to 0: the last seq when
// Read starts); see ledger.CommitLog.
func (l *logDriver) Read(ctx context.Context, from, to ledger.Seq, fn func(ledger.Record) error) error {
	l.mu.Lock()
	b := l.held()
	l.mu.Unlock()
	if from < b.First {
		return l.fail("read", &ledger.TruncatedError{From: from, First: b.First})
	}
	if to == 0 || to > b.Last {
		to = b.Last
	}
	msgs, rd := l.span(from, to)
	for i, m := range msgs {
		if err := ctx.Err(); err != nil {
			return l.fail("read", err)
		}
		seq := from + ledger.Seq(i)
		if m.dropped {
			return l.fail("read", fmt.Errorf("seq %d: %w", seq, &ledger.TruncatedError{From: seq, First: seq + 1}))
		}
		r, err := rd.Record(seq, m.subject, m.data)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// ReadPartition calls fn for the partition's records with seq ≥ from, checking
// the chain as the adapter does; see ledger.CommitLog.
func (l *logDriver) ReadPartition(ctx context.Context, partition string, from ledger.Seq, fn func(ledger.Record) error) error {
	subj := ledger.Subject(l.info.Name, partition)
	op := fmt.Sprintf("read partition %q", partition)
	l.mu.Lock()
	b := l.held()
	if from < b.First {
		l.mu.Unlock()
		return l.fail(op, &ledger.TruncatedError{From: from, First: b.First})
	}
	all := l.bySubj[subj]
	i, _ := slices.BinarySearch(all, from)
	seqs := slices.Clone(all[i:])
	msgs := make([]msg, len(seqs))
	for i, seq := range seqs {
		msgs[i] = l.msgs[seq-l.first]
	}
	rd := l.reader()
	l.mu.Unlock()
	var prev ledger.Seq
	n := 0
	for i, m := range msgs {
		if err := ctx.Err(); err != nil {
			return l.fail(op, err)
		}
		seq := seqs[i]
		if m.dropped {
			continue
		}
		r, err := rd.Record(seq, m.subject, m.data)
		if err != nil {
			return err
		}
		if r.Skip != nil {
			continue // a quarantined message is part of no chain
		}
		p := r.Event.Prev
		if r.Bridge != nil {
			p = r.Bridge.Prev // the quarantined events between are no link
		}
		switch {
		case n == 0 && p >= from, n > 0 && p > prev:
			return l.fail(op, fmt.Errorf("seq %d follows seq %d, which the log no longer holds: %w", seq, p, &ledger.TruncatedError{From: p, First: p + 1}))
		case n > 0 && p < prev:
			return l.fail(op, fmt.Errorf("seq %d has prev %d, but the partition's previous event is seq %d: broken chain: %w", seq, p, prev, ledger.ErrInvalid))
		}
		if err := fn(r); err != nil {
			return err
		}
		prev, n = seq, n+1
	}
	return nil
}

// Follow calls fn for every record from seq from on, waiting for new ones,
// until ctx is done or fn returns an error.
func (l *logDriver) Follow(ctx context.Context, from ledger.Seq, fn func(ledger.Record) error) error {
	next := from
	for {
		l.mu.Lock()
		last, grew := l.last(), l.grew
		l.mu.Unlock()
		if next <= last {
			if err := l.Read(ctx, next, last, fn); err != nil {
				return err
			}
			next = last + 1
			continue
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Quarantines returns every quarantine notice, by quarantined seq.
func (l *logDriver) Quarantines(ctx context.Context) (map[ledger.Seq]ledger.Quarantine, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[ledger.Seq]ledger.Quarantine, len(l.q))
	for s, q := range l.q {
		out[s] = q
	}
	return out, nil
}

// Quarantine stores a notice that the message at q.Seq is not an event; the
// refusals are the adapter's (see ledger.CommitLog). A zero q.At is the log's
// clock's now.
func (l *logDriver) Quarantine(ctx context.Context, q ledger.Quarantine, force bool) (ledger.Seq, error) {
	fail := func(err error) (ledger.Seq, error) {
		return 0, l.fail(fmt.Sprintf("quarantine seq %d", q.Seq), err)
	}
	if q.At.IsZero() {
		q.At = l.now()
	}
	q.At = q.At.UTC()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.held()
	if q.Seq < b.First || q.Seq > b.Last {
		return fail(fmt.Errorf("the log holds seqs %d..%d: %w", b.First, b.Last, ledger.ErrInvalid))
	}
	m, ok := l.at(q.Seq)
	if !ok {
		return fail(fmt.Errorf("the log no longer holds it: %w", ledger.ErrInvalid))
	}
	q, data, err := ledger.NoticeFor(l.reader(), q, force, m.subject, m.data)
	if err != nil {
		return fail(err)
	}
	seq := l.store([]string{ledger.QuarantineSubject(l.info.Name)}, [][]byte{data}, []string{fmt.Sprintf("quarantine/%d", q.Seq)})[0]
	l.q[q.Seq] = q
	return seq, nil
}

// TruncateBefore drops the messages with seq < before except each subject's
// last, as the adapter's purge does; see ledger.CommitLog.
func (l *logDriver) TruncateBefore(ctx context.Context, before ledger.Seq) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var dropped uint64
	for seq := l.first; seq < before && seq <= l.last(); seq++ {
		m := &l.msgs[seq-l.first]
		if m.dropped || l.subject[m.subject] == seq {
			continue
		}
		m.dropped, m.data = true, nil
		dropped++
	}
	return dropped, nil
}
