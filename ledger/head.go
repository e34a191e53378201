package ledger

import (
	"fmt"
	"time"
)

// Head is where a log ends, as the source that answered saw it: what a host
// may claim when it says it is up to date, and how stale that claim may be.
// It serves the sync fast path (nothing past the HWM, and nothing else at it:
// Stamp), the detection of a rewound log (the commit at the head), a
// retention check (never above the head), and what status and hosts report.
//
// A log read from a mirror (a copy of the origin's stream near the host,
// which keeps the origin's seqs) answers from the mirror unless asked for the
// origin (HeadRequest.Origin): such an answer says only that the origin held
// at least Seq at AsOf; it may lag, stall or be cut off from the origin, and
// only the origin's own answer proves there is nothing newer.
type Head struct {
	// Seq is the last seq the source holds (0: none).
	Seq Seq `json:"seq"`
	// Commit is the id of the commit whose event is at Seq, when asked for
	// (HeadRequest.Commit) and the message there is an event of this
	// ledger; "" otherwise.
	Commit string `json:"commit,omitempty"`
	// Stamp identifies the message stored at Seq, read in the same request
	// as Seq ("" for none, or a source that cannot tell): the same message
	// keeps its stamp; another one stored at that seq — the log of a server
	// restored from an older backup and written to since — has another.
	// On JetStream it is the time the server stored the message (the stream
	// state's last_ts: a stream snapshot or a copy of the store restored
	// keeps it); memledger counts the messages it stored. Stamps are
	// compared for equality only: a host that saw this stamp when it last
	// checked the commit at Seq knows, without asking, that the commit is
	// still there; another stamp for the same message (another source
	// answered) costs it that question (Commit, CommitAt), never a wrong
	// answer.
	Stamp string `json:"stamp,omitempty"`
	// Mirror names the mirror that answered ("" when the origin did): the
	// mirror's stream and where it is, for people.
	Mirror string `json:"mirror,omitempty"`
	// AsOf is the time up to which the answer is known to hold for the
	// origin: when the origin answered; for a mirror, its last contact with
	// the origin (a commit the origin stored after it may be missing).
	AsOf time.Time `json:"asOf"`
	// Lag is how many of the origin's messages the mirror knew it lacked at
	// AsOf (0 for the origin). It is the mirror's own count, not a bound:
	// a mirror cut off from the origin cannot know what it missed since.
	Lag uint64 `json:"lag,omitempty"`
	// OriginUnreachable: the origin could not be reached when the head was
	// read (a log read from a mirror reads on; writes are refused).
	OriginUnreachable bool `json:"originUnreachable,omitempty"`
}

// FromOrigin reports whether the origin itself answered: the only head that
// proves the log held nothing past Seq when it was read.
func (h Head) FromOrigin() bool { return h.Mirror == "" }

// Staleness is how old the answer may be at now: 0 for the origin's own
// answer, the time since the mirror's last contact with the origin for a
// mirror's.
func (h Head) Staleness(now time.Time) time.Duration {
	if h.FromOrigin() || h.AsOf.IsZero() {
		return 0
	}
	return max(now.Sub(h.AsOf), 0)
}

// String says where the head came from, for people: "seq 42 (origin)" or
// "seq 40 (mirror SYNCLEDGER_prod in domain eu, as of 15:04:05.000 UTC,
// lag 2)". Describe says how old the answer is instead.
func (h Head) String() string {
	if h.FromOrigin() {
		return fmt.Sprintf("seq %d (origin)", h.Seq)
	}
	return h.mirrorText(h.AsOf.UTC().Format("15:04:05.000 UTC"))
}

// Describe is String with the mirror's staleness at now ("as of 1.2s ago").
func (h Head) Describe(now time.Time) string {
	if h.FromOrigin() {
		return h.String()
	}
	return h.mirrorText(h.Staleness(now).Round(time.Millisecond).String() + " ago")
}

func (h Head) mirrorText(asOf string) string {
	s := fmt.Sprintf("seq %d (mirror %s, as of %s", h.Seq, h.Mirror, asOf)
	if h.Lag > 0 {
		s += fmt.Sprintf(", lag %d", h.Lag)
	}
	if h.OriginUnreachable {
		s += ", origin unreachable"
	}
	return s + ")"
}

// HeadRequest says what CommitLog.Head must ask.
type HeadRequest struct {
	// Origin asks the origin itself, by a request its stream's leader
	// answers (on JetStream: a stream info, never a direct get, which a
	// mirror or a lagging replica may answer). A log read from a mirror
	// then reads at least up to that head: what the mirror still lacks is
	// waited for a moment, then read from the origin. Without Origin, a
	// log answers from where it reads (its mirror, if it has one).
	Origin bool
	// Commit also reads the commit id at the head (one more request).
	Commit bool
}
