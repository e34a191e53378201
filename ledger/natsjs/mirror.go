package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// A mirror of a ledger's stream, near hosts far from the origin (issue 40):
// a stream of the same name in another JetStream domain (a leaf node's), made
// by the admin (Client.CreateMirror), that copies the origin's messages at
// their seqs. A Client whose Read endpoint serves one reads the log there and
// writes to the origin (Write). What the mirror says is a hint, never proof:
//
//   - it lags, stalls and can be cut off from the origin: a read never goes
//     below what this Log knows the origin holds (its own appends, a head the
//     origin gave: the floor); what the mirror lacks up to there is waited
//     for a moment (mirrorWait), then read from the origin;
//   - a seq it does not serve (a gap, a skip, a first seq past the one
//     asked for, a mirror that is down) is unknown, never "deleted": the
//     origin is asked, and only the origin's answer is a truncation or a
//     rewind;
//   - its head is the mirror's, with its last contact with the origin and
//     its own count of what it lacks (ledger.Head): a host reports it as
//     such; a caller that must see every commit stored before a moment (the
//     swamp agent after taking a model's lock) asks the origin's head first
//     (ledger.HeadRequest.Origin: a stream info, which no mirror answers);
//   - the server drops a batch's headers when it mirrors: nothing here reads
//     them (a commit is complete when all its parts are read, by the parts
//     each event states).
//
// A mirror in the origin's own domain would join the origin's direct-get
// group once caught up, and keep answering when it lags later: a direct get
// addressed to the origin could be answered by it. Such a mirror has another
// name (one domain holds one stream of a name), and every direct-get answer
// is taken only when its Nats-Stream header names the stream asked (storedMsg:
// any other is asked of the stream leader), so a read of the origin never
// takes a mirror's answer; and CreateMirror refuses the origin's domain.

// Stream metadata a mirror carries beside the ledger's identity (copied from
// the origin by CreateMirror).
const (
	// MetaMirrorOf is the JetStream domain of the origin a mirror copies.
	MetaMirrorOf = "syncledger.mirror-of"
	// MetaMirrorDomain is the JetStream domain the mirror is in.
	MetaMirrorDomain = "syncledger.mirror-domain"
	// MetaRestored is the origin's mark of its last restore (Log.MarkRestored;
	// absent: never restored), which a mirror copies when it is made: a
	// mirror whose mark is not the origin's was made before the origin's
	// restore, and may serve the commits the restore rewound (StaleMirrorError).
	MetaRestored = "syncledger.restored"
)

// identityKeys are the metadata a mirror copies from its origin: the
// ledger's identity and settings fixed at creation, and the origin's restore
// mark as it was when the mirror was made (not the attestations, which
// change: they are read from the origin).
var identityKeys = []string{MetaName, MetaUUID, MetaFormat, MetaBlobs, MetaNamespaceOf, MetaNamespace, MetaRestored}

// mirrorWait is how long a read through a mirror waits for the mirror to
// hold what the origin is known to hold before it reads the rest from the
// origin: a mirror a few milliseconds behind is cheaper to wait for than a
// round trip to a far origin.
const mirrorWait = 250 * time.Millisecond

// mirrorPoll is how often a read waiting for the mirror asks for its head.
const mirrorPoll = 10 * time.Millisecond

// mirrorSource decodes a stream config's "mirror".
type mirrorSource struct {
	Name          string          `json:"name"`
	OptStartSeq   uint64          `json:"opt_start_seq,omitempty"`
	OptStartTime  *time.Time      `json:"opt_start_time,omitempty"`
	FilterSubject string          `json:"filter_subject,omitempty"`
	Transforms    json.RawMessage `json:"subject_transforms,omitempty"`
	External      *struct {
		APIPrefix string `json:"api"`
	} `json:"external,omitempty"`
}

func mirrorOf(s *streamSettings) *mirrorSource {
	var m *mirrorSource
	if len(s.Mirror) > 0 && json.Unmarshal(s.Mirror, &m) != nil {
		return &mirrorSource{Name: "(undecodable)"}
	}
	return m
}

// repairMirror is what makes a ledger's mirror as syncledger makes it.
const repairMirror = "an admin's syncledger mirror create, on the mirror's server, makes it so (delete a mirror made otherwise first)"

// mirrorStream is a mirror of ledger name's stream (mirrorConfig): the
// whole stream, from its first seq, at the origin's seqs, from another
// JetStream domain; no subjects of its own (a mirror takes no publish), no
// republish (followers near it hear the origin's), direct gets allowed, and
// otherwise every setting a ledger's stream has that a mirror can have: kept
// as written, never dropping on its own (no age, no limits).
func mirrorStream(name string) resource {
	want := ledger.StreamName(name)
	var exp []expectation
	exp = append(exp, expectation{
		setting: "mirror", want: "all of " + want + " in another domain ($JS.<domain>.API)",
		found: func(s *streamSettings) string { return string(s.Mirror) },
		holds: func(s *streamSettings) bool {
			m := mirrorOf(s)
			return m != nil && m.Name == want && m.External != nil && m.External.APIPrefix != "" &&
				m.OptStartSeq == 0 && m.OptStartTime == nil && m.FilterSubject == "" &&
				(len(m.Transforms) == 0 || string(m.Transforms) == "null" || string(m.Transforms) == "[]")
		},
	})
	exp = append(exp, subjectsExactly(), noMaxAge(), allowDirect(), atomicPublish(false), noRePublish(),
		unlimited("max_msgs_per_subject", func(s *streamSettings) int64 { return s.MaxMsgsPerSubject }, nil))
	for _, e := range common() {
		if e.setting != "mirror" {
			exp = append(exp, e)
		}
	}
	for i := range exp {
		exp[i].set = nil // no update: the admin makes it anew (repairMirror)
	}
	return resource{what: fmt.Sprintf("the mirror of ledger %q (stream %s)", name, want), stream: want, expect: exp}
}

// mirrorConfig is the configuration of ledger name's mirror in domain
// domain, copying the origin in domain origin, whose metadata is md.
func mirrorConfig(name, origin, domain string, md map[string]string, replicas int) jetstream.StreamConfig {
	meta := map[string]string{MetaMirrorOf: origin, MetaMirrorDomain: domain}
	for _, k := range identityKeys {
		if v, ok := md[k]; ok {
			meta[k] = v
		}
	}
	return jetstream.StreamConfig{
		Name:        ledger.StreamName(name),
		Description: fmt.Sprintf("syncledger mirror of ledger %s (origin: JetStream domain %s)", name, origin),
		Mirror: &jetstream.StreamSource{
			Name:     ledger.StreamName(name),
			External: &jetstream.ExternalStream{APIPrefix: "$JS." + origin + ".API"},
		},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          max(replicas, 1),
		DenyDelete:        true,
		AllowDirect:       true,
		Metadata:          meta,
	}
}

// replica is how a Log reads through a mirror (see the top of this file).
type replica struct {
	m     *logDriver // the mirror's stream on the read connection: its reads are the mirror's alone
	o     *logDriver // the origin's stream on the write connection: reads the mirror could not give
	where string     // the mirror, for people
	wait  time.Duration

	mu      sync.Mutex
	floor   ledger.Seq // the origin is known to hold at least this
	floorAt time.Time  // since when
	mlast   ledger.Seq // the mirror's last seq as last seen

	checked chan struct{} // closed once the origin's identity was checked (verifyOrigin)
	cerr    error         // its result
	down    func() bool   // the write connection's last attempt to connect failed

	restored string      // the origin's restore mark the mirror copied when it was made (MetaRestored)
	stale    atomic.Bool // the origin's mark differs: the mirror is not read (reads go to the origin)
}

// StaleMirrorError: the mirror was made before its origin's last restore
// (their restore marks differ). A mirror never copies a seq it holds again,
// so it may serve, at their seqs, commits the restore rewound: it is not
// read (the origin answers every read) and a commit through it is refused
// until an admin makes it anew.
type StaleMirrorError struct {
	Ledger, Mirror         string
	MirrorMark, OriginMark string
}

func (e *StaleMirrorError) Error() string {
	was := "before"
	if e.MirrorMark != "" {
		was = "at " + e.MirrorMark + ", before"
	}
	return fmt.Sprintf("ledger %q: the mirror %s was made %s the origin's restore at %s: it may serve commits the restore rewound, so reads go to the origin; way out: an admin makes it anew — syncledger --nats ORIGIN --read-nats THIS-MIRROR'S-SERVER --ledger %s mirror create --replace", e.Ledger, e.Mirror, was, e.OriginMark, e.Ledger)
}

// MirrorNotOriginError is the error of opening, as the ledger, the stream a
// server holds as a mirror of it ('syncledger mirror create'): --nats names
// a server of the mirror's region. A mirror takes no writes; backup, restore,
// upgrade and the other admin commands act on the origin. errors.Is(err,
// ledger.ErrInvalid) holds.
type MirrorNotOriginError struct {
	Ledger, Stream string
	Of, Domain     string // the origin's JetStream domain, and the mirror's ("" if not recorded)
}

func (e *MirrorNotOriginError) Error() string {
	of, in := "", ""
	if e.Of != "" {
		of = " (domain " + e.Of + ")"
	}
	if e.Domain != "" {
		in = " in domain " + e.Domain
	}
	return fmt.Sprintf("stream %s%s is a mirror of ledger %q, not the ledger: it takes no writes, and backup, restore, upgrade and the other admin commands act on the origin; "+
		"way out: point --nats at a server of the origin's region%s and give this server as --read-nats (reads then come from the mirror); "+
		"if the origin's region is lost for good, 'syncledger mirror promote' with --nats this server makes this mirror the ledger (docs/ops.md, Regions)",
		e.Stream, in, e.Ledger, of)
}

func (e *MirrorNotOriginError) Unwrap() error { return ledger.ErrInvalid }

// useMirror reports whether the mirror may be read: not once the origin's
// check found it stale.
func (r *replica) useMirror() bool { return !r.stale.Load() }

// mirrorState is a mirror's STREAM.INFO answer: its bounds and its source.
type mirrorState struct {
	apiResponse
	Config struct {
		Metadata map[string]string `json:"metadata"`
	} `json:"config"`
	State  stateOf     `json:"state"`
	Mirror *mirrorInfo `json:"mirror,omitempty"`
}

// mirrorInfo is what a mirror's STREAM.INFO says of its source.
type mirrorInfo struct {
	Lag    uint64        `json:"lag"`    // the origin's messages it knows it lacks
	Active time.Duration `json:"active"` // since its last contact with the origin
	Error  *struct {
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// raise records that the origin holds at least seq, as of at.
func (r *replica) raise(seq ledger.Seq, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq > r.floor {
		r.floor, r.floorAt = seq, at
	}
}

// known returns the floor and the mirror's last seq as last seen.
func (r *replica) known() (floor ledger.Seq, floorAt time.Time, mlast ledger.Seq) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.floor, r.floorAt, r.mlast
}

// state asks the mirror for its state (one STREAM.INFO on the read
// connection, answered by the mirror's leader).
func (r *replica) state(ctx context.Context) (mirrorState, ledger.Bounds, error) {
	var st mirrorState
	if err := r.m.request(ctx, apiPrefix+"STREAM.INFO."+r.m.stream, nil, &st); err != nil {
		return st, ledger.Bounds{}, r.m.mapErr(err)
	}
	if u := st.Config.Metadata[MetaUUID]; u != r.m.uuid {
		return st, ledger.Bounds{}, fmt.Errorf("mirror %s now holds ledger %s, opened as %s: %w", r.where, u, r.m.uuid, ledger.ErrLineage)
	}
	s := st.State
	b := ledger.Bounds{First: ledger.Seq(s.FirstSeq), Last: ledger.Seq(s.LastSeq)}
	if s.Msgs == 0 {
		b.First = b.Last + 1
	}
	r.mu.Lock()
	r.mlast = max(r.mlast, b.Last)
	r.mu.Unlock()
	return st, b, nil
}

// covered waits, up to r.wait, until the mirror holds the floor, and
// reports whether it does: the mirror's answers then include everything the
// origin is known to hold. It asks nothing when the mirror's last seq as
// last seen already covers the floor.
func (r *replica) covered(ctx context.Context) (bool, error) {
	floor, _, mlast := r.known()
	if floor <= mlast {
		return true, nil
	}
	deadline := time.Now().Add(r.wait)
	for {
		_, b, err := r.state(ctx)
		if err != nil {
			return false, nil // the mirror cannot say: the origin will
		}
		if b.Last >= floor {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := ledger.SleepCtx(ctx, mirrorPoll); err != nil {
			return false, err
		}
	}
}

// unserved reports whether err means the mirror could not give what was
// asked — not there, not yet, gone from it, or the mirror itself out of
// reach — which the origin then answers. A record that does not decode, a
// lineage that differs, a caller's own error are not.
func unserved(err error) bool {
	return errors.Is(err, ledger.ErrTruncated) || errors.Is(err, ledger.ErrLagging) || errors.Is(err, ledger.ErrRewound) ||
		errors.Is(err, ledger.ErrUnreachable) || errors.Is(err, ledger.ErrNotFound) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}

// callerErr marks an error of the caller's fn, so that it is returned as is
// and never taken for the mirror's.
type callerErr struct{ err error }

func (e callerErr) Error() string { return e.err.Error() }

// callers returns err as its fn returned it when it is the caller's
// (callerErr), err otherwise.
func callers(err error) error {
	var ce callerErr
	if errors.As(err, &ce) {
		return ce.err
	}
	return err
}

// bounds is the Log's view of the stream's bounds: the mirror's, its last
// raised to the floor (what the mirror lacks below it is read from the
// origin). A mirror that cannot answer leaves the origin's.
func (r *replica) bounds(ctx context.Context) (ledger.Bounds, error) {
	if !r.useMirror() {
		return r.o.bounds(ctx)
	}
	_, b, err := r.state(ctx)
	if err != nil {
		if !unserved(err) {
			return ledger.Bounds{}, err
		}
		return r.o.bounds(ctx)
	}
	floor, _, _ := r.known()
	b.Last = max(b.Last, floor)
	return b, nil
}

// head answers Log.Head (see ledger.HeadRequest).
func (r *replica) head(ctx context.Context, req ledger.HeadRequest) (ledger.Head, error) {
	if req.Origin {
		if r.writeDown() {
			return ledger.Head{}, &OriginUnreachableError{Ledger: r.o.name, Mirror: r.where, Err: fmt.Errorf("the write endpoint does not answer: %w", ledger.ErrUnreachable)}
		}
		h, err := r.o.Head(ctx, req)
		if err != nil {
			return ledger.Head{}, err
		}
		r.raise(h.Seq, h.AsOf)
		return h, nil
	}
	if !r.useMirror() {
		return r.o.Head(ctx, req)
	}
	now := time.Now()
	st, b, err := r.state(ctx)
	if err != nil {
		if !unserved(err) {
			return ledger.Head{}, err
		}
		return r.o.Head(ctx, req) // the mirror is out of reach: the origin answers
	}
	floor, floorAt, _ := r.known()
	if floor > b.Last {
		// The origin told this Log of more than the mirror holds.
		h := ledger.Head{Seq: floor, AsOf: floorAt}
		if req.Commit {
			h.Commit, err = r.o.commitAt(ctx, floor)
		}
		return h, err
	}
	h := ledger.Head{Seq: b.Last, Stamp: st.State.stamp(), Mirror: r.where, AsOf: now, OriginUnreachable: r.originDown()}
	if st.Mirror != nil {
		h.AsOf, h.Lag = now.Add(-st.Mirror.Active), st.Mirror.Lag
	}
	if req.Commit && b.Last >= b.First {
		h.Commit, err = r.m.commitAt(ctx, b.Last)
	}
	return h, err
}

// writeDown reports whether the write connection's last attempt to connect
// failed and it is not connected since (its handlers run after the status
// changes: a connection up again may still be marked down a moment).
func (r *replica) writeDown() bool { return r.down() && !r.o.nc.IsConnected() }

// MirrorHead is the mirror's own head, as the mirror says it (one stream
// info of the mirror): its last seq, its last contact with the origin and
// the messages it knows it lacks, never raised to what this Log knows the
// origin holds (Head does that). ok is false when the Log does not read
// through a mirror.
func (l *Log) MirrorHead(ctx context.Context) (ledger.Head, bool, error) { return l.d.mirrorHead(ctx) }

func (l *logDriver) mirrorHead(ctx context.Context) (h ledger.Head, ok bool, err error) {
	r := l.rep
	if r == nil {
		return ledger.Head{}, false, nil
	}
	now := time.Now()
	st, b, err := r.state(ctx)
	if err != nil {
		return ledger.Head{}, true, fmt.Errorf("ledger %q: the mirror %s: %w", l.name, r.where, err)
	}
	h = ledger.Head{Seq: b.Last, Stamp: st.State.stamp(), Mirror: r.where, AsOf: now, OriginUnreachable: r.originDown()}
	if st.Mirror != nil {
		h.AsOf, h.Lag = now.Add(-st.Mirror.Active), st.Mirror.Lag
	}
	return h, true, nil
}

// MirrorStale waits for the Log's check of the origin (at most one request
// timeout after it opened) and returns a *StaleMirrorError when the mirror it
// reads was made before the origin's last restore; nil otherwise (also when
// it reads no mirror, or the origin could not be checked).
func (l *Log) MirrorStale(ctx context.Context) error { return l.d.mirrorStale(ctx) }

// mirrorStale is Log.MirrorStale.
func (l *logDriver) mirrorStale(ctx context.Context) error {
	r := l.rep
	if r == nil {
		return nil
	}
	select {
	case <-r.checked:
	case <-ctx.Done():
		return ctx.Err()
	}
	var se *StaleMirrorError
	if errors.As(r.checkErr(), &se) {
		return se
	}
	return nil
}

// originDown reports whether the origin was found out of reach: its
// identity check could not reach it, or the write connection, once up, is
// down.
func (r *replica) originDown() bool {
	if r.writeDown() {
		return true
	}
	select {
	case <-r.checked:
		return errors.Is(r.checkErr(), ledger.ErrUnreachable) || !r.o.nc.IsConnected()
	default:
		return false // not known yet
	}
}

// reachable fails, with the way out, when the origin is out of reach, for
// an operation only the origin answers (a write, the attestations): at once
// when its connection failed to connect, else once the background check of
// the origin (at most one request timeout after the Log's opening) found it
// so. An origin out of reach when the Log opened and connected since is
// checked again, here: a long-lived process writes once it is back.
func (r *replica) reachable(ctx context.Context, name string) error {
	if !r.writeDown() {
		select {
		case <-r.checked:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !errors.Is(r.checkErr(), ledger.ErrUnreachable) {
			return nil
		}
		if r.o.nc.IsConnected() {
			err := r.checkOrigin(ctx)
			r.mu.Lock()
			r.cerr = err
			r.mu.Unlock()
			if !errors.Is(err, ledger.ErrUnreachable) {
				return nil // writable says what else it found
			}
		}
	}
	return &OriginUnreachableError{Ledger: name, Mirror: r.where, Err: fmt.Errorf("the write endpoint does not answer: %w", ledger.ErrUnreachable)}
}

// partitionLastSeq answers Log.PartitionLastSeq: the mirror's once it holds
// the floor, else the origin's.
func (r *replica) partitionLastSeq(ctx context.Context, partition string) (ledger.Seq, error) {
	if !r.useMirror() {
		return r.o.PartitionLastSeq(ctx, partition)
	}
	ok, err := r.covered(ctx)
	if err != nil {
		return 0, err
	}
	if ok {
		s, err := r.m.PartitionLastSeq(ctx, partition)
		if err == nil || !unserved(err) {
			return s, err
		}
	}
	return r.o.PartitionLastSeq(ctx, partition)
}

// partitionTip answers Log.PartitionTip as partitionLastSeq does: the
// mirror's once it holds the floor, else the origin's.
func (r *replica) partitionTip(ctx context.Context, partition string) (ledger.Seq, string, error) {
	if !r.useMirror() {
		return r.o.PartitionTip(ctx, partition)
	}
	ok, err := r.covered(ctx)
	if err != nil {
		return 0, "", err
	}
	if ok {
		s, c, err := r.m.PartitionTip(ctx, partition)
		if err == nil || !unserved(err) {
			return s, c, err
		}
	}
	return r.o.PartitionTip(ctx, partition)
}

// commitAt answers Log.CommitAt: the mirror keeps the origin's seqs, so the
// message it holds at seq is the origin's; what it lacks (a gap, a skip,
// past its last) or cannot answer is asked of the origin.
func (r *replica) commitAt(ctx context.Context, seq ledger.Seq) (string, error) {
	if !r.useMirror() {
		return r.o.CommitAt(ctx, seq)
	}
	c, err := r.m.CommitAt(ctx, seq)
	if err == nil || !(unserved(err) || errors.Is(err, ledger.ErrNotFound)) {
		return c, err
	}
	return r.o.CommitAt(ctx, seq)
}

// partitionHead answers Log.PartitionHead as partitionLastSeq does. The
// mirror's "no events" (ErrNotFound), once it holds the floor, is an answer.
func (r *replica) partitionHead(ctx context.Context, partition string) (ledger.Record, error) {
	if !r.useMirror() {
		return r.o.PartitionHead(ctx, partition)
	}
	ok, err := r.covered(ctx)
	if err != nil {
		return ledger.Record{}, err
	}
	if ok {
		rec, err := r.m.PartitionHead(ctx, partition)
		if err == nil || !unserved(err) || errors.Is(err, ledger.ErrNotFound) && !errors.Is(err, ledger.ErrUnreachable) {
			return rec, err
		}
	}
	return r.o.PartitionHead(ctx, partition)
}

// read answers Log.Read: from the mirror what it holds, from the origin what
// it cannot give (below its first seq, a gap, past its last once waited
// for).
func (r *replica) read(ctx context.Context, from, to ledger.Seq, fn func(ledger.Record) error) error {
	if !r.useMirror() {
		return r.o.Read(ctx, from, to, fn)
	}
	_, b, err := r.state(ctx)
	if err != nil && !unserved(err) {
		return err
	}
	mirrorOK := err == nil
	floor, _, _ := r.known()
	end := to
	if end == 0 {
		end = max(b.Last, floor)
		if !mirrorOK {
			ob, err := r.o.bounds(ctx)
			if err != nil {
				return fmt.Errorf("ledger %q read: %w", r.o.name, err)
			}
			end = ob.Last
		}
	}
	next := from
	deliver := func(rec ledger.Record) error {
		if err := fn(rec); err != nil {
			return callerErr{err}
		}
		next = rec.Seq + 1
		return nil
	}
	deadline := time.Now().Add(r.wait)
	for mirrorOK && next <= end && next >= b.First {
		if next <= b.Last {
			err := r.m.readIn(ctx, b, next, min(end, b.Last), deliver)
			var ce callerErr
			switch {
			case errors.As(err, &ce):
				return ce.err
			case err != nil && !unserved(err):
				return err
			case err != nil:
				mirrorOK = false // the mirror cannot give next: the origin will
			}
			continue
		}
		if time.Now().After(deadline) {
			break
		}
		if err := ledger.SleepCtx(ctx, mirrorPoll); err != nil {
			return err
		}
		if _, b, err = r.state(ctx); err != nil {
			mirrorOK = false
		}
	}
	if next > end {
		return nil
	}
	err = r.o.Read(ctx, next, end, deliver)
	return callers(err)
}

// readPartition answers Log.ReadPartition: the mirror's records once it
// holds the floor, then the origin's from where the mirror ended (all of
// them when the mirror cannot give the first).
func (r *replica) readPartition(ctx context.Context, partition string, from ledger.Seq, fn func(ledger.Record) error) error {
	if !r.useMirror() {
		return r.o.ReadPartition(ctx, partition, from, fn)
	}
	next := from
	deliver := func(rec ledger.Record) error {
		if err := fn(rec); err != nil {
			return callerErr{err}
		}
		next = rec.Seq + 1
		return nil
	}
	ok, err := r.covered(ctx)
	if err != nil {
		return err
	}
	if ok {
		err := r.m.ReadPartition(ctx, partition, next, deliver)
		var ce callerErr
		switch {
		case errors.As(err, &ce):
			return ce.err
		case err == nil:
			return nil
		case !unserved(err):
			return err
		}
	}
	err = r.o.ReadPartition(ctx, partition, next, deliver)
	return callers(err)
}

// quarantines answers Log.Quarantines: the notices the mirror holds (the
// origin's, up to its last seq), and the origin's too when the origin is
// known to hold more than the mirror.
func (r *replica) quarantines(ctx context.Context) (map[ledger.Seq]ledger.Quarantine, error) {
	if !r.useMirror() {
		return r.o.Quarantines(ctx)
	}
	ok, err := r.covered(ctx)
	if err != nil {
		return nil, err
	}
	if ok {
		qs, err := r.m.Quarantines(ctx)
		if err == nil || !unserved(err) {
			return qs, err
		}
	}
	return r.o.Quarantines(ctx)
}

// verifyOrigin checks, once, in the background from the Log's opening, the
// origin's stream as Open would have (its identity, the lineage the mirror
// states, its settings): a write waits for it. A read through the mirror
// does not.
func (r *replica) verifyOrigin(l *logDriver) {
	defer close(r.checked)
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.timeout)
	defer cancel()
	err := r.checkOrigin(ctx)
	r.mu.Lock()
	r.cerr = err
	r.mu.Unlock()
}

// checkErr is the result of the origin's last check (verifyOrigin, or
// reachable's again).
func (r *replica) checkErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cerr
}

// checkOrigin checks the origin's stream (one stream info): its identity,
// the lineage the mirror states, its settings; and raises the floor to its
// last seq.
func (r *replica) checkOrigin(ctx context.Context) error {
	o := r.o
	ctx, cancel := o.reqCtx(ctx)
	defer cancel()
	var st streamConfig
	err := o.request(ctx, apiPrefix+"STREAM.INFO."+o.stream, nil, &st)
	if code, ok := apiCode(err); ok && code == codeStreamNotFound {
		return fmt.Errorf("the origin of ledger %q has no stream %s (the mirror %s copies it): %w", o.name, o.stream, r.where, ledger.ErrNoLedger)
	}
	if err != nil {
		return fmt.Errorf("the origin of ledger %q: %w", o.name, o.mapErr(err))
	}
	if u := st.Config.Metadata[MetaUUID]; u != o.uuid {
		return fmt.Errorf("the origin's stream %s holds ledger %s, its mirror %s ledger %s: %w", o.stream, u, r.where, o.uuid, ledger.ErrLineage)
	}
	if err := ledgerStream(o.name).check(&st.Config); err != nil {
		return err
	}
	r.raise(ledger.Seq(st.State.LastSeq), time.Now())
	if mark := st.Config.Metadata[MetaRestored]; mark != r.restored {
		r.stale.Store(true)
		return &StaleMirrorError{Ledger: o.name, Mirror: r.where, MirrorMark: r.restored, OriginMark: mark}
	}
	return nil
}

// writable waits for the origin's check and returns its error, with a way
// out when the origin is out of reach: reads go on from the mirror.
func (r *replica) writable(ctx context.Context, name string) error {
	if err := r.reachable(ctx, name); err != nil {
		return err
	}
	err := r.checkErr()
	if err == nil && r.o.nc.IsConnected() {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("connection %s: %w", r.o.nc.Status(), ledger.ErrUnreachable)
	}
	if errors.Is(err, ledger.ErrUnreachable) {
		return &OriginUnreachableError{Ledger: name, Mirror: r.where, Err: err}
	}
	return err
}

// OriginUnreachableError is a write refused because the origin (the Write
// endpoint) cannot be reached while the log is read from a mirror: reads go
// on from the mirror (stale, and saying so); writes wait for the origin, or
// for an operator's failover (docs/ops.md, "Losing the origin's region").
type OriginUnreachableError struct {
	Ledger string
	Mirror string
	Err    error
}

func (e *OriginUnreachableError) Error() string {
	return fmt.Sprintf("ledger %q: the origin is unreachable (%v): reads go on from the mirror %s, but a commit needs the origin — wait for it, or, if its region is lost, fail over (docs/ops.md, \"Losing the origin's region\")", e.Ledger, e.Err, e.Mirror)
}

func (e *OriginUnreachableError) Unwrap() error { return e.Err }

// openReplica opens ledger name read from the mirror on rnc and written to
// the origin on nc: one STREAM.INFO of the mirror, on the read connection.
// ok is false when rnc serves the origin's stream itself (a server of the
// origin's cluster or domain): the caller opens the origin as usual.
func openReplica(ctx context.Context, nc, rnc *nats.Conn, name string, opts []Option, down func() bool) (*logDriver, bool, error) {
	m, err := newLog(rnc, name, opts)
	if err != nil {
		return nil, false, err
	}
	var st struct {
		streamConfig
		Mirror *mirrorInfo `json:"mirror,omitempty"`
	}
	now := time.Now()
	err = m.request(ctx, apiPrefix+"STREAM.INFO."+m.stream, nil, &st)
	if code, isAPI := apiCode(err); isAPI && code == codeStreamNotFound {
		return nil, false, &ledger.ConfigError{Resource: fmt.Sprintf("the mirror of ledger %q (stream %s) on the read endpoint", name, m.stream),
			Setting: "the stream", Found: "missing", Want: "a mirror of the origin's", Repair: "an admin's syncledger mirror create makes it (with --nats the origin, --read-nats this server)"}
	}
	if err != nil {
		return nil, false, fmt.Errorf("open ledger %q on the read endpoint: %w", name, m.mapErr(err))
	}
	if mirrorOf(&st.Config) == nil {
		return nil, false, nil
	}
	if err := m.adoptMirror(&st.Config); err != nil {
		return nil, false, fmt.Errorf("open ledger %q: %w", name, err)
	}
	// The Log itself writes to the origin, with the mirror's identity; its
	// reads go through the replica: the mirror, and the origin (o) for what
	// the mirror cannot give.
	l, err := newLog(nc, name, opts)
	if err != nil {
		return nil, false, err
	}
	o, err := newLog(nc, name, opts)
	if err != nil {
		return nil, false, err
	}
	for _, x := range []*logDriver{l, o} {
		// The origin republishes what it stores (a mirror is made only of
		// an origin that does: CreateMirror); followers near the mirror
		// hear it over the leaf node.
		x.uuid, x.info, x.republish = m.uuid, m.info, true
	}
	md := st.Config.Metadata
	where := m.stream
	if d := md[MetaMirrorDomain]; d != "" {
		where += " in domain " + d
	}
	r := &replica{m: m, o: o, where: where, wait: mirrorWait, mlast: ledger.Seq(st.State.LastSeq), checked: make(chan struct{}), down: down, restored: md[MetaRestored]}
	l.rep = r
	if l.opts.openSeq {
		h := ledger.Head{Seq: ledger.Seq(st.State.LastSeq), Stamp: st.State.stamp(), Mirror: where, AsOf: now}
		if st.Mirror != nil {
			h.AsOf, h.Lag = now.Add(-st.Mirror.Active), st.Mirror.Lag
		}
		l.opened = opened{head: h, at: time.Now(), valid: true}
	}
	go r.verifyOrigin(l)
	return l, true, nil
}

// adoptMirror checks a mirror's identity as adopt does the origin's, then
// its configuration (mirrorStream), and records the lineage it states.
func (l *logDriver) adoptMirror(c *streamSettings) error {
	if err := l.identify(c); err != nil {
		return err
	}
	if err := mirrorStream(l.name).check(c); err != nil {
		var ce *ledger.ConfigError
		if errors.As(err, &ce) {
			ce.Repair = repairMirror // no update makes a mirror so
		}
		return err
	}
	l.record(c)
	return nil
}

// domainOf returns the JetStream domain of the server nc reaches ("" when it
// has none): one $JS.API.INFO request, which every role may send.
func domainOf(ctx context.Context, nc *nats.Conn, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, apiPrefix+"INFO", nil)
	if err != nil {
		return "", unreachable(nc, err)
	}
	var info struct {
		apiResponse
		Domain string `json:"domain"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return "", fmt.Errorf("$JS.API.INFO: undecodable answer: %w", err)
	}
	if info.Error != nil {
		return "", info.Error
	}
	return info.Domain, nil
}

// MirrorResult says what CreateMirror found or made.
type MirrorResult struct {
	Created      bool   `json:"created"`            // made now (false: it was there, as wanted)
	Replaced     bool   `json:"replaced,omitempty"` // a mirror that was there deleted first (MirrorOptions.Replace)
	Stream       string `json:"stream"`             // the mirror's stream
	Domain       string `json:"domain"`             // the mirror's JetStream domain
	OriginDomain string `json:"originDomain"`       // the origin's
}

// MirrorOptions say how CreateMirrorWith makes a mirror.
type MirrorOptions struct {
	Replicas int // of the mirror's stream in its domain (at least 1)
	// Replace deletes a mirror that is there and makes it anew: what a
	// mirror of a ledger restored otherwise than by Restore's caller (a
	// data directory put back) needs, since a mirror never copies again the
	// seqs it holds (docs/ops.md, Backups).
	Replace bool
}

// MirrorRecord is the origin's record of a mirror made of it (CreateMirror,
// RecreateMirror), in the origin stream's metadata under
// syncledger.mirror.<domain>: where a restore finds the mirrors to make anew.
// A backup carries it (the log's metadata).
type MirrorRecord struct {
	Domain   string `json:"domain"`        // the mirror's JetStream domain
	URL      string `json:"url,omitempty"` // the read endpoint it was made through (no credentials)
	Replicas int    `json:"replicas"`
}

// metaMirrorPrefix prefixes the origin's records of its mirrors.
const metaMirrorPrefix = "syncledger.mirror."

// mirrorsOf returns the mirror records of an origin's metadata, by domain.
func mirrorsOf(md map[string]string) []MirrorRecord {
	var out []MirrorRecord
	for k, v := range md {
		d, ok := strings.CutPrefix(k, metaMirrorPrefix)
		if !ok {
			continue
		}
		var m MirrorRecord
		if json.Unmarshal([]byte(v), &m) != nil || m.Domain != d || d == "" {
			continue // not a record this build made: ignored
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b MirrorRecord) int { return strings.Compare(a.Domain, b.Domain) })
	return out
}

// Mirrors returns the mirrors recorded in the origin's stream (one stream
// info of the origin): those mirror create or a restore made.
func (l *Log) Mirrors(ctx context.Context) ([]MirrorRecord, error) { return l.d.mirrors(ctx) }

// mirrors is Log.Mirrors.
func (l *logDriver) mirrors(ctx context.Context) ([]MirrorRecord, error) {
	o := l
	if l.rep != nil {
		o = l.rep.o
	}
	var st streamConfig
	if err := o.request(ctx, apiPrefix+"STREAM.INFO."+o.stream, nil, &st); err != nil {
		return nil, fmt.Errorf("ledger %q: its mirrors: %w", l.name, o.mapErr(err))
	}
	return mirrorsOf(st.Config.Metadata), nil
}

// recordMirror records m in the origin lg's metadata.
func recordMirror(ctx context.Context, lg *logDriver, m MirrorRecord) error {
	j, err := json.Marshal(m)
	if err != nil {
		return err
	}
	key, val := metaMirrorPrefix+m.Domain, string(j)
	err = lg.updateMeta(ctx, func(md map[string]string) bool { return md[key] == val }, func(md map[string]string) { md[key] = val })
	if err != nil {
		return fmt.Errorf("the mirror is made, but recording it in the origin's stream (where a restore finds it) failed — run mirror create again: %w", err)
	}
	return nil
}

// withoutUserinfo returns a server URL list without credentials (recorded
// where every role reads): whatever precedes an '@' in each URL's authority
// goes, with or without a scheme.
func withoutUserinfo(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		scheme, rest, ok := strings.Cut(p, "://")
		if !ok {
			scheme, rest = "", p
		}
		auth, path, hasPath := strings.Cut(rest, "/")
		if at := strings.LastIndex(auth, "@"); at >= 0 {
			auth = auth[at+1:]
		}
		p = auth
		if hasPath {
			p += "/" + path
		}
		if ok {
			p = scheme + "://" + p
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// CreateMirror is CreateMirrorWith with replicas and no Replace.
func (c *Client) CreateMirror(ctx context.Context, name string, replicas int) (MirrorResult, error) {
	return c.CreateMirrorWith(ctx, name, MirrorOptions{Replicas: replicas})
}

// CreateMirrorWith makes, in the JetStream domain of the Client's Read
// endpoint, the mirror of ledger name whose origin is the Write endpoint's
// stream (mirrorConfig: the same name, the origin's seqs, reached through
// the origin domain's API over a leaf node), or checks the one there (a
// mirror made otherwise is a *ledger.ConfigError; with opt.Replace it is
// deleted and made anew, as is one made before the origin's last restore),
// and records it in the origin's stream
// (MirrorRecord). It needs the admin role on both. It refuses a Read
// endpoint in the origin's own domain: a mirror there joins the origin's
// direct-get group and answers for it when it lags; and an origin without a
// domain, which no mirror in another domain can reach.
func (c *Client) CreateMirrorWith(ctx context.Context, name string, opt MirrorOptions) (MirrorResult, error) {
	fail := func(err error) (MirrorResult, error) {
		return MirrorResult{}, fmt.Errorf("create the mirror of ledger %q: %w", name, err)
	}
	if c.r == c.w {
		return fail(fmt.Errorf("no read endpoint: the mirror is made where it points (the origin is the write endpoint): %w", ledger.ErrInvalid))
	}
	origin, err := domainOf(ctx, c.w, c.cfg.Timeout)
	if err != nil {
		return fail(fmt.Errorf("the origin's JetStream domain: %w", err))
	}
	domain, err := domainOf(ctx, c.r, c.cfg.Timeout)
	if err != nil {
		return fail(fmt.Errorf("the read endpoint's JetStream domain: %w", err))
	}
	if err := mirrorDomains(origin, domain); err != nil {
		return fail(err)
	}
	lg, st, err := c.mirrorable(ctx, name)
	if err != nil {
		return fail(err)
	}
	res := MirrorResult{Stream: lg.stream, Domain: domain, OriginDomain: origin}
	rec := MirrorRecord{Domain: domain, URL: withoutUserinfo(c.cfg.Read.URL), Replicas: max(opt.Replicas, 1)}
	js, err := jetstream.New(c.r, jetstream.WithDefaultTimeout(c.cfg.Timeout))
	if err != nil {
		return fail(err)
	}
	// One may be there: it must be this ledger's mirror, as syncledger
	// makes it (a create of the same configuration would succeed too: it
	// is asked first, to say whether it was made now).
	m, err := newLog(c.r, name, []Option{WithTimeout(c.cfg.Timeout)})
	if err != nil {
		return fail(err)
	}
	var have streamConfig
	err = m.request(ctx, apiPrefix+"STREAM.INFO."+m.stream, nil, &have)
	code, isAPI := apiCode(err)
	switch {
	case isAPI && code == codeStreamNotFound:
	case err != nil:
		return fail(m.mapErr(err))
	case opt.Replace || have.Config.Metadata[MetaRestored] != st.Config.Metadata[MetaRestored]:
		// Replaced on demand, or made before the origin's last restore
		// (StaleMirrorError): what it holds may be the rewound history.
		dctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		if err := js.DeleteStream(dctx, m.stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fail(fmt.Errorf("delete the mirror there: %w", unreachable(c.r, err)))
		}
		res.Replaced = true
	default:
		if err := m.adoptMirror(&have.Config); err != nil {
			return fail(err)
		}
		if m.uuid != lg.uuid {
			return fail(fmt.Errorf("the read endpoint's %s mirrors ledger %s, the origin holds ledger %s: %w", m.stream, m.uuid, lg.uuid, ledger.ErrLineage))
		}
		rec.Replicas = max(have.Config.Replicas, 1)
		if err := recordMirror(ctx, lg, rec); err != nil {
			return fail(err)
		}
		return res, nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if _, err := js.CreateStream(rctx, mirrorConfig(name, origin, domain, st.Config.Metadata, rec.Replicas)); err != nil {
		return fail(unreachable(c.r, err))
	}
	res.Created = true
	if err := recordMirror(ctx, lg, rec); err != nil {
		return fail(err)
	}
	return res, nil
}

// mirrorDomains checks that a mirror in domain can copy an origin in
// domain origin.
func mirrorDomains(origin, domain string) error {
	switch {
	case origin == "":
		return fmt.Errorf("the origin's JetStream has no domain, and a mirror in another one reaches it through its domain's API: give the origin's servers one (jetstream { domain: NAME }; docs/ops.md, Regions): %w", ledger.ErrInvalid)
	case domain == origin:
		return fmt.Errorf("the read endpoint is in the origin's JetStream domain %q: a mirror there would join the origin's direct-get group once caught up and answer for the origin when it lags; put it on a leaf node with a domain of its own (docs/ops.md, Regions): %w", origin, ledger.ErrInvalid)
	case domain == "":
		return fmt.Errorf("the read endpoint's JetStream has no domain: give its server one (jetstream { domain: NAME }), other than the origin's %q: %w", origin, ledger.ErrInvalid)
	}
	return nil
}

// mirrorable opens the origin of ledger name on the write connection and
// checks it can be mirrored: it republishes what it stores.
func (c *Client) mirrorable(ctx context.Context, name string) (*logDriver, streamConfig, error) {
	var st streamConfig
	lg, err := openLog(ctx, c.w, name, WithTimeout(c.cfg.Timeout))
	if err != nil {
		return nil, st, fmt.Errorf("the origin: %w", err)
	}
	if !lg.republish {
		return nil, st, fmt.Errorf("the origin's stream %s does not republish what it stores (a ledger of an earlier release): followers near the mirror would hear nothing; way out: %s, then mirror create again: %w", lg.stream, RePublishRepair, ledger.ErrInvalid)
	}
	if err := lg.request(ctx, apiPrefix+"STREAM.INFO."+lg.stream, nil, &st); err != nil {
		return nil, st, fmt.Errorf("the origin: %w", lg.mapErr(err))
	}
	return lg, st, nil
}

// DeleteMirror deletes ledger name's mirror in JetStream domain m.Domain,
// reached from the origin (the Write endpoint) through that domain's API
// over the leaf node: a restore's first step, so that no host reads the
// history the restore rewinds from it meanwhile. A domain that holds no such
// stream is no error. It needs the admin role.
func (c *Client) DeleteMirror(ctx context.Context, name string, m MirrorRecord) error {
	js, err := jetstream.NewWithDomain(c.w, m.Domain, jetstream.WithDefaultTimeout(c.cfg.Timeout))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := js.DeleteStream(ctx, ledger.StreamName(name)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete the mirror of ledger %q in domain %s: %w", name, m.Domain, domainErr(c.w, err))
	}
	return nil
}

// domainErr maps an error of a request to another domain's API: no one
// answering there is the domain out of reach.
func domainErr(nc *nats.Conn, err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return fmt.Errorf("no server of the domain answers (its leaf node is down or cut off): %w: %w", err, ledger.ErrUnreachable)
	}
	return unreachable(nc, err)
}

// RecreateMirror makes ledger name's mirror in domain m.Domain anew (the one
// there deleted first), reached from the origin through the domain's API,
// and records it in the origin's stream: what a restore does for each mirror
// the ledger had, since a mirror never copies again the seqs it holds — after
// its origin was restored from an older backup it would keep serving the
// commits the restore rewound at their old seqs, then copy the new history
// only past them. It needs the admin role on both.
func (c *Client) RecreateMirror(ctx context.Context, name string, m MirrorRecord) (MirrorResult, error) {
	fail := func(err error) (MirrorResult, error) {
		return MirrorResult{}, fmt.Errorf("recreate the mirror of ledger %q in domain %s: %w", name, m.Domain, err)
	}
	origin, err := domainOf(ctx, c.w, c.cfg.Timeout)
	if err != nil {
		return fail(fmt.Errorf("the origin's JetStream domain: %w", err))
	}
	if err := mirrorDomains(origin, m.Domain); err != nil {
		return fail(err)
	}
	lg, st, err := c.mirrorable(ctx, name)
	if err != nil {
		return fail(err)
	}
	if err := c.DeleteMirror(ctx, name, m); err != nil {
		return fail(err)
	}
	js, err := jetstream.NewWithDomain(c.w, m.Domain, jetstream.WithDefaultTimeout(c.cfg.Timeout))
	if err != nil {
		return fail(err)
	}
	m.Replicas = max(m.Replicas, 1)
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if _, err := js.CreateStream(rctx, mirrorConfig(name, origin, m.Domain, st.Config.Metadata, m.Replicas)); err != nil {
		return fail(domainErr(c.w, err))
	}
	if err := recordMirror(ctx, lg, m); err != nil {
		return fail(err)
	}
	return MirrorResult{Created: true, Replaced: true, Stream: lg.stream, Domain: m.Domain, OriginDomain: origin}, nil
}

// PromoteMirror makes the mirror of ledger name on the Client's Write
// endpoint the ledger's own stream, in place — the failover when the
// origin's region is lost (docs/ops.md, "Losing the origin's region"): one
// stream update (JetStream promotes a mirror whose update drops its mirror
// setting) that drops the mirror setting and the mirror's metadata, takes the
// ledger's subjects, and sets the restore mark (MetaRestored), so that a
// mirror made of the lost origin is stale against it. The caller then makes
// the rest as this release makes it (Ledger.Upgrade: republish, buckets, dead
// letters). Messages the lost origin stored after the mirror's last seq are
// not in it: hosts that applied them heal (they find the ledger rewound). It
// needs the admin role; a stream that is no mirror is an error wrapping
// ledger.ErrInvalid, changing nothing.
func (c *Client) PromoteMirror(ctx context.Context, name, mark string) error {
	fail := func(err error) error { return fmt.Errorf("promote the mirror of ledger %q: %w", name, err) }
	stream := ledger.StreamName(name)
	var info struct {
		apiResponse
		Config map[string]json.RawMessage `json:"config"`
	}
	err := apiRequest(ctx, c.w, c.cfg.Timeout, apiPrefix+"STREAM.INFO."+stream, nil, &info)
	if code, ok := apiCode(err); ok && code == codeStreamNotFound {
		return fail(fmt.Errorf("no stream %s on this server (--nats names the mirror's server): %w", stream, ledger.ErrNoLedger))
	}
	if err != nil {
		return fail(unreachable(c.w, err))
	}
	var md map[string]string
	if err := json.Unmarshal(info.Config["metadata"], &md); err != nil || md[MetaName] != name {
		return fail(fmt.Errorf("stream %s is no mirror of ledger %q syncledger made: %w", stream, name, ledger.ErrInvalid))
	}
	if m, ok := info.Config["mirror"]; !ok || string(m) == "null" {
		return fail(fmt.Errorf("stream %s is no mirror: it is the ledger's stream already (nothing to promote): %w", stream, ledger.ErrInvalid))
	}
	delete(info.Config, "mirror")
	delete(md, MetaMirrorOf)
	delete(md, MetaMirrorDomain)
	md[MetaRestored] = mark
	var err2 error
	if info.Config["metadata"], err2 = json.Marshal(md); err2 != nil {
		return fail(err2)
	}
	if info.Config["subjects"], err2 = json.Marshal([]string{ledger.SubjectPrefix(name) + ">"}); err2 != nil {
		return fail(err2)
	}
	body, err := json.Marshal(info.Config)
	if err != nil {
		return fail(err)
	}
	var resp apiResponse
	if err := apiRequest(ctx, c.w, c.cfg.Timeout, apiPrefix+"STREAM.UPDATE."+stream, body, &resp); err != nil {
		return fail(unreachable(c.w, err))
	}
	return nil
}
