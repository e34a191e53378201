package ledger

import (
	"encoding/json"
	"fmt"
	"time"
)

// A message of the log that is not a valid event (it does not decode, or breaks
// a rule of the format or of its partition's chain) stops every reader at its
// seq: safety first. The stream denies deletes, so the way out is a quarantine
// notice: an admin's record, in the log itself, that the message at a seq is
// not an event. Every reader (hosts, fresh hosts, snapshots, rebuilds, replays,
// consumers) learns the notices before it reads, and skips exactly those seqs
// the same way: the log hands them out as Records with Skip set and no Event.
//
// Notices live on the reserved subject syncledger.<ledger>.p.~q. "~q" is not
// an EscapeToken output (an escape is "~" and two upper-case hex digits), so no
// partition key maps to it; only the admin role may publish there (natsauth).

// QuarantineToken is the subject token of quarantine notices.
const QuarantineToken = "~q"

// QuarantineSubject returns the subject of a ledger's quarantine notices.
func QuarantineSubject(ledgerName string) string { return SubjectPrefix(ledgerName) + QuarantineToken }

// Quarantine is a notice that the message at Seq is not applied by any reader.
type Quarantine struct {
	V      int       `json:"v"`      // FormatVersion
	Ledger string    `json:"ledger"` // the ledger's UUID
	Seq    Seq       `json:"seq"`    // the quarantined message
	Reason string    `json:"reason"` // why, for people
	By     string    `json:"by"`     // who: the admin's host id
	At     time.Time `json:"at"`
	// The quarantined message's place in its partition's chain, when it is
	// a well-formed event (a quarantine with force): its partition, modelSeq
	// and prev. A later event of the partition that names it as its prev
	// follows it in every reader's chain as a link known skipped
	// (Record.Bridge), so quarantining an event a commit already extended
	// leaves that commit readable (issue 26 point 5). Empty otherwise.
	Partition string `json:"partition,omitempty"`
	ModelSeq  uint64 `json:"modelSeq,omitempty"`
	Prev      Seq    `json:"prev,omitempty"`
}

// Linked reports whether q records the quarantined event's chain link.
func (q Quarantine) Linked() bool { return q.Partition != "" }

// WithLink returns q with the chain link of the message it quarantines, stored
// on subject with body data in ledger name of lineage uuid, when that message is
// a well-formed event on its own partition's subject; else q without one. Every
// CommitLog's Quarantine records it this way.
func WithLink(q Quarantine, name, uuid, subject string, data []byte) Quarantine {
	q.Partition, q.ModelSeq, q.Prev = "", 0, 0
	ev, err := DecodeEvent(data)
	if err != nil || ev.Ledger != uuid || ev.Prev >= q.Seq {
		return q
	}
	if p, err := PartitionFromSubject(name, subject); err == nil && p == ev.Partition {
		q.Partition, q.ModelSeq, q.Prev = ev.Partition, ev.ModelSeq, ev.Prev
	}
	return q
}

// NoticeFor decides whether q (a notice Log has made the ledger's and
// checked) may quarantine the message at q.Seq, stored on subject with body
// data, read through rd (the ledger's reader, its quarantines loaded up to
// the log's last seq), and returns the notice to store, with the message's
// chain link (WithLink), and its encoding. It refuses (ErrInvalid) a
// quarantine notice, a well-formed event unless force (a host may have
// applied it: quarantine one only when it breaks a rule the decoder cannot
// see), and (ErrConflict) a seq already quarantined. Every LogDriver's
// Quarantine decides this way, once it holds the message.
func NoticeFor(rd *MessageReader, q Quarantine, force bool, subject string, data []byte) (Quarantine, []byte, error) {
	if _, notice := rd.NoticeOf(q.Seq, subject, data); notice {
		return q, nil, fmt.Errorf("it is a quarantine notice: %w", ErrInvalid)
	}
	if r, err := rd.Record(q.Seq, subject, data); err == nil && r.Skip == nil && !force {
		e := r.Event
		return q, nil, fmt.Errorf("it is a well-formed event (partition %q, commit %s by %s at %s), which hosts may have applied: quarantine it only if it breaks a rule the decoder cannot see (its chain or parts lie, its content is missing), with force: %w",
			e.Partition, e.Commit, e.Host, e.At.UTC().Format(time.RFC3339), ErrInvalid)
	}
	if prev, ok := rd.Quarantined[q.Seq]; ok {
		return q, nil, fmt.Errorf("already quarantined by %s at %s (%q): %w", prev.By, prev.At.Format(time.RFC3339), prev.Reason, ErrConflict)
	}
	// A well-formed event of this ledger on its partition's subject was a
	// link of that partition's chain, which later events may name as their
	// prev: the notice records it, so that every reader bridges it.
	q = WithLink(q, rd.Name, rd.UUID, subject, data)
	b, err := EncodeQuarantine(q)
	if err != nil {
		return q, nil, err
	}
	return q, b, nil
}

// Skip marks a Record that no reader applies: a quarantined message, a
// quarantine notice, a fence record or a fence check. Its Event is empty.
type Skip struct {
	// Partition is the partition of a quarantined message's subject ("" for a
	// notice, or a subject that names no partition). Its chain goes on past the
	// seq: the partition's next event names the quarantined seq as its prev
	// (JetStream's last-subject-sequence check sees the message).
	Partition string
	// Notice is set on the quarantine notice itself: the record at Seq is the
	// notice, not the message it quarantines (Quarantine.Seq).
	Notice bool
	// Quarantine is the notice (for a notice, itself); empty for a fence
	// record or check.
	Quarantine Quarantine
	// Fence is set on a fence record (a lock taken), Check on a fence check
	// (a fenced commit's): see Fence. Neither has a partition.
	Fence *FenceRecord
	Check *FenceCheck
}

// EncodeQuarantine returns the JSON form of a valid notice.
func EncodeQuarantine(q Quarantine) ([]byte, error) {
	if err := validateQuarantine(q); err != nil {
		return nil, fmt.Errorf("encode quarantine: %w", err)
	}
	q.At = q.At.UTC()
	b, err := json.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("encode quarantine: %w", err)
	}
	return b, nil
}

// DecodeQuarantine parses and checks a notice (strictly: unknown fields refused).
func DecodeQuarantine(b []byte) (Quarantine, error) {
	var q Quarantine
	if len(b) > MaxEventSize {
		return q, fmt.Errorf("decode quarantine: %d bytes: %w", len(b), ErrTooLarge)
	}
	if err := strictDecode(b, &q); err != nil {
		return Quarantine{}, fmt.Errorf("decode quarantine: %v: %w", err, ErrInvalid)
	}
	if err := validateQuarantine(q); err != nil {
		return Quarantine{}, fmt.Errorf("decode quarantine: %w", err)
	}
	return q, nil
}

func validateQuarantine(q Quarantine) error {
	switch {
	case q.V != FormatVersion:
		return fmt.Errorf("version %d (this build reads %d): %w", q.V, FormatVersion, ErrUnknownVersion)
	case !isUUID(q.Ledger):
		return fmt.Errorf("ledger %q is not a uuid: %w", clip(q.Ledger), ErrInvalid)
	case q.Seq == 0:
		return fmt.Errorf("seq 0: %w", ErrInvalid)
	case q.Reason == "" || len(q.Reason) > MaxMessageLen:
		return fmt.Errorf("reason must be 1-%d bytes: %w", MaxMessageLen, ErrInvalid)
	case q.By == "" || len(q.By) > MaxHostLen:
		return fmt.Errorf("by must be 1-%d bytes: %w", MaxHostLen, ErrInvalid)
	case q.At.IsZero():
		return fmt.Errorf("no time: %w", ErrInvalid)
	case q.Partition == "" && (q.ModelSeq != 0 || q.Prev != 0):
		return fmt.Errorf("a chain link without a partition: %w", ErrInvalid)
	case q.Partition != "" && (q.ModelSeq == 0 || q.Prev >= q.Seq || (q.ModelSeq == 1) != (q.Prev == 0)):
		return fmt.Errorf("chain link modelSeq %d, prev %d of seq %d: %w", q.ModelSeq, q.Prev, q.Seq, ErrInvalid)
	}
	return nil
}

// RecordError is an error about one message of the log: it does not decode, or
// breaks a rule (format, partition chain, commit parts, its content). Every
// reader stops there; if the message is bad, an admin's quarantine of Seq lets
// every reader skip it.
type RecordError struct {
	Seq Seq
	Err error
	// Decoded: the message is a well-formed event (it breaks a rule only a
	// reader sees: its chain, its parts, its content). Quarantining such a
	// message needs force: a host may have applied it.
	Decoded bool
}

func (e *RecordError) Error() string { return e.Err.Error() }
func (e *RecordError) Unwrap() error { return e.Err }
