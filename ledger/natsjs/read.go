package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// LastSeq returns the stream's last seq from a stream info request answered by
// the stream leader — the cheapest authoritative request JetStream offers (see
// the package doc for the measured cost).
//
// With WithOpenSeq, the first call within openFresh (500 ms) of Open, with
// nothing written through this Log in between, answers from the stream info
// request Open made instead: a seq as recent as the command's start, which is all a one-shot
// command's fast path needs (a no-op sync makes one request, not two). A caller
// that knows of a later seq than the answer — a cache HWM another process moved
// meanwhile — asks again and gets a fresh one.
func (l *logDriver) LastSeq(ctx context.Context) (ledger.Seq, error) {
	if h, ok := l.opened.take(); ok {
		return h.Seq, nil
	}
	b, err := l.viewBounds(ctx)
	if err != nil {
		return 0, fmt.Errorf("ledger %q last seq: %w", l.name, err)
	}
	return b.Last, nil
}

// viewBounds is the stream's bounds as this Log reads it: the stream
// leader's, or through a mirror the mirror's, raised to what the origin is
// known to hold (replica.bounds).
func (l *logDriver) viewBounds(ctx context.Context) (ledger.Bounds, error) {
	if l.rep != nil {
		return l.rep.bounds(ctx)
	}
	return l.bounds(ctx)
}

// Bounds returns the stream's first and last seq; an empty stream has
// First = Last+1. Through a mirror they are the mirror's, the last raised to
// what the origin is known to hold.
func (l *logDriver) Bounds(ctx context.Context) (ledger.Bounds, error) {
	b, err := l.viewBounds(ctx)
	if err != nil {
		return ledger.Bounds{}, fmt.Errorf("ledger %q bounds: %w", l.name, err)
	}
	return b, nil
}

// Head returns the stream's last seq from one stream info request answered
// by the stream leader (the origin's own answer: a direct get could be
// answered by a mirror or a lagging replica), with the stored time of the
// message there (the stream state's last_ts) as its stamp, and with
// req.Commit the commit id there, read through the leader too (one more
// request). With WithOpenSeq, the first call within openFresh of Open that
// asks neither for the origin nor for the commit answers from Open's stream info request, as LastSeq
// does: a no-op sync makes one request, not two.
func (l *logDriver) Head(ctx context.Context, req ledger.HeadRequest) (ledger.Head, error) {
	if !req.Origin && !req.Commit {
		if h, ok := l.opened.take(); ok {
			return h, nil
		}
	}
	if l.rep != nil {
		h, err := l.rep.head(ctx, req)
		if err != nil {
			return ledger.Head{}, fmt.Errorf("ledger %q head: %w", l.name, err)
		}
		return h, nil
	}
	asOf := time.Now()
	b, stamp, err := l.boundsStamp(ctx)
	if err != nil {
		return ledger.Head{}, fmt.Errorf("ledger %q head: %w", l.name, err)
	}
	h := ledger.Head{Seq: b.Last, Stamp: stamp, AsOf: asOf}
	if req.Commit && b.Last >= b.First {
		if h.Commit, err = l.commitAt(ctx, b.Last); err != nil {
			return ledger.Head{}, fmt.Errorf("ledger %q head: %w", l.name, err)
		}
	}
	return h, nil
}

// commitAt returns the commit id of the event the stream leader holds at seq
// ("" when the message there is not an event of this ledger, or is gone),
// quarantined or not.
func (l *logDriver) commitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	m, ok, err := l.leaderGet(ctx, msgGetRequest{Seq: uint64(seq)})
	if err != nil || !ok || m.Seq != seq {
		return "", err
	}
	// Quarantined or not: the commit stored there is what identifies it.
	r, err := (&ledger.MessageReader{Name: l.name, UUID: l.uuid}).Record(m.Seq, m.Subject, m.Data)
	if err != nil || r.Skip != nil {
		return "", nil // not an event of this ledger: no commit to compare
	}
	return r.Event.Commit, nil
}

// PartitionLastSeq returns the seq of the partition's last event (0 if none),
// from one direct get of the subject's last message.
func (l *logDriver) PartitionLastSeq(ctx context.Context, partition string) (ledger.Seq, error) {
	if l.rep != nil {
		return l.rep.partitionLastSeq(ctx, partition)
	}
	m, ok, err := l.directLast(ctx, ledger.Subject(l.name, partition))
	if err != nil {
		return 0, fmt.Errorf("ledger %q partition %q last seq: %w", l.name, partition, l.mapErr(err))
	}
	if !ok {
		return 0, nil
	}
	return m.Seq, nil
}

// PartitionTip returns the partition's last seq and the commit id of the
// message there, from one direct get of the subject's last message (see
// ledger.CommitLog).
func (l *logDriver) PartitionTip(ctx context.Context, partition string) (ledger.Seq, string, error) {
	if l.rep != nil {
		return l.rep.partitionTip(ctx, partition)
	}
	m, ok, err := l.directLast(ctx, ledger.Subject(l.name, partition))
	if err != nil {
		return 0, "", fmt.Errorf("ledger %q partition %q tip: %w", l.name, partition, l.mapErr(err))
	}
	if !ok {
		return 0, "", nil
	}
	return m.Seq, ledger.CommitOf(l.name, l.uuid, m.Seq, m.Subject, m.Data), nil
}

// CommitAt returns the commit id of the event stored at seq, from one direct
// get of that seq (see ledger.CommitLog).
func (l *logDriver) CommitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	if l.rep != nil {
		return l.rep.commitAt(ctx, seq)
	}
	m, ok, err := l.directGet(ctx, msgGetRequest{Seq: uint64(seq)})
	if err != nil {
		return "", fmt.Errorf("ledger %q commit at seq %d: %w", l.name, seq, l.mapErr(err))
	}
	if !ok || m.Seq != seq {
		return "", fmt.Errorf("ledger %q commit at seq %d: no message: %w", l.name, seq, ledger.ErrNotFound)
	}
	return ledger.CommitOf(l.name, l.uuid, seq, m.Subject, m.Data), nil
}

// PartitionHead returns the partition's last event; ledger.ErrNotFound if none.
func (l *logDriver) PartitionHead(ctx context.Context, partition string) (ledger.Record, error) {
	if l.rep != nil {
		return l.rep.partitionHead(ctx, partition)
	}
	m, ok, err := l.directLast(ctx, ledger.Subject(l.name, partition))
	if err != nil {
		return ledger.Record{}, fmt.Errorf("ledger %q partition %q head: %w", l.name, partition, l.mapErr(err))
	}
	if !ok {
		return ledger.Record{}, fmt.Errorf("ledger %q partition %q head: no events: %w", l.name, partition, ledger.ErrNotFound)
	}
	b, err := l.bounds(ctx)
	if err == nil {
		err = l.loadQuarantines(ctx, max(b.Last, m.Seq))
	}
	if err != nil {
		return ledger.Record{}, fmt.Errorf("ledger %q partition %q head: %w", l.name, partition, err)
	}
	r, err := l.decode(m)
	if err != nil || r.Skip == nil {
		return r, err
	}
	// The subject's last message is quarantined: the partition's last event
	// is before it (rare: read the partition).
	var head *ledger.Record
	err = l.ReadPartition(ctx, partition, 1, func(r ledger.Record) error {
		if r.Skip == nil {
			head = &r
		}
		return nil
	})
	switch {
	case err != nil:
		return ledger.Record{}, err
	case head == nil:
		return ledger.Record{}, fmt.Errorf("ledger %q partition %q head: only quarantined messages: %w", l.name, partition, ledger.ErrNotFound)
	}
	return *head, nil
}

// decode turns a stored message into a record (ledger.MessageReader), with
// the quarantined seqs loaded so far.
func (l *logDriver) decode(m rawMsg) (ledger.Record, error) {
	return l.reader().Record(m.Seq, m.Subject, m.Data)
}

// reader returns a ledger.MessageReader for one read, with the quarantined
// seqs loaded so far.
func (l *logDriver) reader() *ledger.MessageReader {
	return &ledger.MessageReader{Name: l.name, UUID: l.uuid, Quarantined: l.quarantined()}
}

// Read calls fn for every record with from ≤ seq ≤ to in seq order, reading the
// stream with batched direct gets (cost proportional to the records read). It
// checks the stream's first seq before reading, and that the seqs it is given are
// contiguous, so a purge before or during the read is an error, never a silent
// skip.
//
// The reading and decoding run one step ahead of fn, on a goroutine of their
// own: fn (a sync applying records) overlaps the network round trip and the
// decoding of the next batch. fn itself is called on the caller's goroutine,
// and Read returns only once that goroutine has stopped.
func (l *logDriver) Read(ctx context.Context, from, to ledger.Seq, fn func(ledger.Record) error) error {
	if l.rep != nil {
		return l.rep.read(ctx, from, to, fn)
	}
	b, err := l.bounds(ctx)
	if err != nil {
		return fmt.Errorf("ledger %q read: %w", l.name, err)
	}
	return l.readIn(ctx, b, from, to, fn)
}

// readIn is Read within bounds b, the stream's as just asked.
func (l *logDriver) readIn(ctx context.Context, b ledger.Bounds, from, to ledger.Seq, fn func(ledger.Record) error) error {
	if from < b.First {
		return fmt.Errorf("ledger %q read: %w", l.name, &ledger.TruncatedError{From: from, First: b.First})
	}
	end := b.Last
	if to != 0 && to < end {
		end = to
	}
	if from > end {
		return nil
	}
	// Notices come after the seqs they quarantine: load them up to the last.
	if err := l.loadQuarantines(ctx, b.Last); err != nil {
		return fmt.Errorf("ledger %q read: %w", l.name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	batches := make(chan readBatch, 1)
	go l.readAhead(ctx, from, end, batches)
	defer func() {
		cancel()
		for range batches { // wait for readAhead to stop
		}
	}()
	last := from - 1
	for rb := range batches {
		for _, r := range rb.recs {
			if err := fn(r); err != nil {
				return err
			}
			last = r.Seq
		}
		if rb.err != nil {
			return rb.err
		}
	}
	if last != end { // readAhead stopped early without an error: ctx is done
		err := context.Cause(ctx)
		if err == nil {
			err = errors.New("read ahead stopped")
		}
		return fmt.Errorf("ledger %q read stopped at seq %d of %d..%d: %w", l.name, last, from, end, err)
	}
	return nil
}

// readBatch is one batch of decoded records; err, if set, ends the read after
// them.
type readBatch struct {
	recs []ledger.Record
	err  error
}

// readAhead reads and decodes seqs from..end into batches, and closes it.
func (l *logDriver) readAhead(ctx context.Context, from, end ledger.Seq, batches chan<- readBatch) {
	defer close(batches)
	send := func(rb readBatch) bool {
		select {
		case batches <- rb:
			return true
		case <-ctx.Done():
			return false
		}
	}
	bt, err := l.newBatcher()
	if err != nil {
		send(readBatch{err: fmt.Errorf("ledger %q read: %w", l.name, err)})
		return
	}
	defer bt.close()
	rd := l.reader()
	next := from
	req := func(from ledger.Seq) msgGetRequest {
		return msgGetRequest{Seq: uint64(from), Batch: int(min(directBatchSize, uint64(end-from+1))), MaxBytes: directMaxBytes}
	}
	var (
		lagSince time.Time
		ahead    string     // reply subject of the request sent ahead, if any
		aheadFor ledger.Seq // the seq it asked from
	)
	for next <= end {
		var (
			msgs []rawMsg
			err  error
		)
		if ahead != "" && aheadFor == next {
			rctx, cancel := l.reqCtx(ctx)
			msgs, _, err = bt.collect(rctx, ahead, req(next))
			cancel()
			if err != nil && ctx.Err() == nil { // ask again, with get's retries
				msgs, _, err = bt.get(ctx, req(next))
			}
		} else {
			msgs, _, err = bt.get(ctx, req(next))
		}
		ahead = ""
		if err != nil {
			send(readBatch{err: fmt.Errorf("ledger %q read from seq %d: %w", l.name, next, err)})
			return
		}
		if len(msgs) == 0 {
			// Nothing at or after next although the leader's last seq is ≥ next:
			// the replica answering is behind, or the stream was purged past end.
			if lagSince.IsZero() {
				lagSince = time.Now()
			}
			if err := l.missing(ctx, next, next, lagSince); err != nil {
				send(readBatch{err: fmt.Errorf("ledger %q read: %w", l.name, err)})
				return
			}
			continue
		}
		lagSince = time.Time{}
		// Ask for the batch after this one before decoding this one: the server
		// reads it meanwhile. (A batch that turns out bad abandons it; its
		// answers go to a subscription about to close.)
		if after := msgs[len(msgs)-1].Seq + 1; after <= end && after > next {
			if ahead, err = bt.send(req(after)); err != nil {
				ahead = ""
			}
			aheadFor = after
		}
		rb := readBatch{recs: make([]ledger.Record, 0, len(msgs))}
		for _, m := range msgs {
			if m.Seq > end {
				break
			}
			if m.Seq != next {
				rb.err = fmt.Errorf("ledger %q read: %w", l.name, l.missing(ctx, next, m.Seq, time.Time{}))
				break
			}
			r, err := rd.Record(m.Seq, m.Subject, m.Data)
			if err != nil {
				rb.err = err
				break
			}
			rb.recs = append(rb.recs, r)
			next++
		}
		if !send(rb) || rb.err != nil {
			return
		}
		if len(rb.recs) < len(msgs) { // past end
			return
		}
	}
}

// lagRetry is how often a read waiting for a lagging replica asks again.
const lagRetry = 20 * time.Millisecond

// missing explains why seq want was not returned (got is the seq returned
// instead, or want itself when nothing was): the stream's first seq moved past
// it (TruncatedError), or a message inside the stream is gone (deleted or purged
// by subject). When nothing was returned although the stream leader holds want,
// the answering replica is behind: missing waits a little and returns nil for a
// retry, for up to the per-request timeout since lagSince.
func (l *logDriver) missing(ctx context.Context, want, got ledger.Seq, lagSince time.Time) error {
	b, err := l.bounds(ctx)
	if err != nil {
		return err
	}
	switch {
	case want < b.First:
		return &ledger.TruncatedError{From: want, First: b.First}
	case got > want:
		return fmt.Errorf("seqs %d..%d are missing inside the stream (deleted or purged by subject): %w", want, got-1, ledger.ErrTruncated)
	case want > b.Last:
		return fmt.Errorf("seq %d: the stream's last seq went back to %d (stream recreated or restored?): %w", want, b.Last, ledger.ErrRewound)
	case lagSince.IsZero() || time.Since(lagSince) > l.opts.timeout:
		return fmt.Errorf("seq %d: not served by a direct get although the stream holds it: %w (retry later)", want, ledger.ErrLagging)
	}
	return ledger.SleepCtx(ctx, lagRetry)
}

// ReadPartition calls fn for the partition's records with seq ≥ from, up to the
// partition's last seq when it starts (asked of the stream leader), in seq
// order, reading the partition's subject with batched direct gets (the server's
// per-subject index makes the cost proportional to the partition's records
// read). from below the stream's first seq is a TruncatedError even if the
// partition had nothing there: the log cannot tell. Each record's Prev must be
// the seq of the record before it (and the first one's Prev below from), so a
// partition event purged before or during the read is an error wrapping
// ledger.ErrTruncated, never a silent skip. A replica answering the direct gets
// that is behind the leader is waited for, up to the per-request timeout.
func (l *logDriver) ReadPartition(ctx context.Context, partition string, from ledger.Seq, fn func(ledger.Record) error) error {
	if l.rep != nil {
		return l.rep.readPartition(ctx, partition, from, fn)
	}
	subj := ledger.Subject(l.name, partition)
	b, err := l.bounds(ctx)
	if err != nil {
		return fmt.Errorf("ledger %q read partition %q: %w", l.name, partition, err)
	}
	if from < b.First {
		return fmt.Errorf("ledger %q read partition %q: %w", l.name, partition, &ledger.TruncatedError{From: from, First: b.First})
	}
	end, err := l.leaderLastSeq(ctx, subj)
	if err != nil {
		return fmt.Errorf("ledger %q read partition %q: %w", l.name, partition, err)
	}
	if end < from {
		return nil
	}
	if err := l.loadQuarantines(ctx, max(b.Last, end)); err != nil {
		return fmt.Errorf("ledger %q read partition %q: %w", l.name, partition, err)
	}
	// Walk the chain back from the partition's last event by its prev pointers:
	// each step is one direct get by seq, so a few new events cost a few requests
	// however long the stream is (a scan by subject from `from` costs in
	// proportion to the stream between from and end). Long backlogs, and chains
	// that reach events the stream no longer holds, take the forward scan.
	if recs, ok := l.walkBack(ctx, subj, from, end); ok {
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next, prev = from, ledger.Seq(0)
		n          int
		lagSince   time.Time
	)
	for next <= end {
		msgs, pending, err := l.directBatch(ctx, msgGetRequest{
			Seq: uint64(next), NextFor: subj, Batch: directBatchSize, MaxBytes: directMaxBytes,
		})
		if err != nil {
			return fmt.Errorf("ledger %q read partition %q from seq %d: %w", l.name, partition, next, err)
		}
		for _, m := range msgs {
			if m.Seq > end {
				return nil
			}
			if m.Subject != subj {
				return fmt.Errorf("ledger %q read partition %q: seq %d has subject %s: %w", l.name, partition, m.Seq, m.Subject, ledger.ErrInvalid)
			}
			r, err := l.decode(m)
			if err != nil {
				return err
			}
			if r.Skip != nil {
				// A quarantined message is part of no chain (the next event
				// names the one before it as its prev): not the partition's.
				next = m.Seq + 1
				continue
			}
			p := r.Event.Prev
			if r.Bridge != nil {
				p = r.Bridge.Prev // the quarantined events between are no link
			}
			switch {
			case n == 0 && p >= from, n > 0 && p > prev:
				// The partition event at seq p was not returned: purged since the
				// read began (the first seq moved past it), or deleted inside.
				err := l.missing(ctx, p, p+1, time.Time{})
				return fmt.Errorf("ledger %q read partition %q: seq %d follows seq %d, which the stream no longer holds: %w", l.name, partition, m.Seq, p, err)
			case n > 0 && p < prev:
				return fmt.Errorf("ledger %q read partition %q: seq %d has prev %d, but the partition's previous event is seq %d: broken chain: %w", l.name, partition, m.Seq, p, prev, ledger.ErrInvalid)
			}
			if err := fn(r); err != nil {
				return err
			}
			prev, next, n = m.Seq, m.Seq+1, n+1
		}
		if next > end || pending > 0 {
			lagSince = time.Time{}
			continue
		}
		// The answering replica has nothing more up to end: it is behind the
		// leader, or the rest was purged meanwhile.
		if lagSince.IsZero() {
			lagSince = time.Now()
		}
		if err := l.missing(ctx, next, next, lagSince); err != nil {
			return fmt.Errorf("ledger %q read partition %q: %w", l.name, partition, err)
		}
	}
	return nil
}

// walkBackMax bounds how many events walkBack collects before it leaves the read
// to the forward scan.
const walkBackMax = 512

// walkBack returns the partition's records with seq in [from, end], oldest
// first, by following prev pointers back from end. ok is false (and the caller
// scans forward) when there are more than walkBackMax of them, or any step fails
// or finds something unexpected: the forward scan reports such cases precisely.
// Its steps share one subscription (a batcher), not one each.
func (l *logDriver) walkBack(ctx context.Context, subj string, from, end ledger.Seq) ([]ledger.Record, bool) {
	b, err := l.newBatcher()
	if err != nil {
		return nil, false
	}
	defer b.close()
	var recs []ledger.Record
	for s := end; s >= from; {
		if len(recs) == walkBackMax {
			return nil, false
		}
		msgs, _, err := b.get(ctx, msgGetRequest{Seq: uint64(s), Batch: 1})
		if err != nil || len(msgs) != 1 || ledger.Seq(msgs[0].Seq) != s || msgs[0].Subject != subj {
			return nil, false
		}
		r, err := l.decode(msgs[0])
		if err != nil || r.Skip != nil || r.Event.Prev >= s {
			return nil, false
		}
		recs = append(recs, r)
		s = r.Event.Prev
		if r.Bridge != nil {
			s = r.Bridge.Prev
		}
		if s == 0 {
			break
		}
	}
	slices.Reverse(recs)
	return recs, true
}

// Partitions lists the partitions the ledger's stream holds events of, from
// the stream's subjects (one stream info request with its subjects: the
// dashboard's list). The quarantine notices' subject is none.
func (l *Log) Partitions(ctx context.Context) ([]string, error) { return l.d.partitions(ctx) }

func (l *logDriver) partitions(ctx context.Context) ([]string, error) {
	ctx, cancel := l.reqCtx(ctx)
	defer cancel()
	st, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, fmt.Errorf("ledger %q partitions: %w", l.name, l.mapStreamErr(err))
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(l.prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("ledger %q partitions: %w", l.name, l.mapStreamErr(err))
	}
	keys := make([]string, 0, len(info.State.Subjects))
	notices := ledger.QuarantineSubject(l.name)
	for subj := range info.State.Subjects {
		if subj == notices {
			continue // quarantine notices: no partition's
		}
		k, err := ledger.UnescapeToken(strings.TrimPrefix(subj, l.prefix))
		if err != nil {
			return nil, fmt.Errorf("ledger %q partitions: subject %q: %w", l.name, subj, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
