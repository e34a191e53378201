package ledger

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MessageReader turns the messages a log stores (a seq, a subject and a body)
// into Records, the one way every CommitLog implementation does it: a quarantine
// notice, a quarantined message, a fence record or a fence check is a Record
// with Skip set; anything else must be an event of this ledger's lineage on its
// own partition's subject. A
// message it cannot take is a *RecordError naming the seq, wrapping ErrInvalid,
// ErrUnknownVersion or ErrLineage.
//
// One reader serves one read: it shares repeated strings between the events it
// decodes and remembers the partitions of the subjects it saw. Its zero value
// with Name and UUID set is ready to use.
type MessageReader struct {
	Name string // the ledger's name (its subjects)
	UUID string // the ledger's lineage
	// Quarantined are the quarantined seqs, as the read began (nil: none).
	Quarantined map[Seq]Quarantine

	dec   Decoder
	parts map[string]string // subject → partition
}

// CommitOf returns the commit id of the message stored at seq on subject
// with body data, when it is an event of ledger name of lineage uuid on its
// own partition's subject; "" otherwise (CommitLog.CommitAt).
//
// It reads the event's identity alone (its ledger, commit and partition
// fields), not its entries: a host compares commit ids, the read that applies
// the event validates it.
func CommitOf(name, uuid string, seq Seq, subject string, data []byte) string {
	if subject == QuarantineSubject(name) {
		return ""
	}
	p, err := PartitionFromSubject(name, subject)
	if err != nil {
		return ""
	}
	var id struct {
		Ledger    string `json:"ledger"`
		Commit    string `json:"commit"`
		Partition string `json:"partition"`
	}
	if json.Unmarshal(data, &id) != nil || id.Ledger != uuid || id.Partition != p {
		return ""
	}
	return id.Commit
}

// maxReaderParts bounds a reader's subject table.
const maxReaderParts = 1 << 14

// Record decodes the message stored at seq on subject.
func (r *MessageReader) Record(seq Seq, subject string, data []byte) (Record, error) {
	rec, err := r.record(seq, subject, data)
	if err != nil {
		return Record{}, &RecordError{Seq: seq, Err: err}
	}
	return rec, nil
}

func (r *MessageReader) record(seq Seq, subject string, data []byte) (Record, error) {
	if skip, ok, err := r.skipped(seq, subject, data); ok || err != nil {
		return Record{Seq: seq, Skip: skip}, err
	}
	p, ok := r.parts[subject]
	if !ok {
		var err error
		if p, err = PartitionFromSubject(r.Name, subject); err != nil {
			return Record{}, fmt.Errorf("ledger %q seq %d: %w", r.Name, seq, err)
		}
		if r.parts == nil {
			r.parts = map[string]string{}
		}
		if len(r.parts) < maxReaderParts {
			r.parts[subject] = p
		}
	}
	ev, err := r.dec.Decode(data)
	if err != nil {
		return Record{}, fmt.Errorf("ledger %q seq %d (subject %s): %w", r.Name, seq, subject, err)
	}
	if ev.Partition != p {
		return Record{}, fmt.Errorf("ledger %q seq %d: event of partition %q stored on the subject of partition %q: %w", r.Name, seq, ev.Partition, p, ErrInvalid)
	}
	if ev.Ledger != r.UUID {
		return Record{}, fmt.Errorf("ledger %q seq %d: event of ledger %s in the stream of ledger %s: %w", r.Name, seq, ev.Ledger, r.UUID, ErrLineage)
	}
	rec := Record{Seq: seq, Event: ev}
	if ev.Prev > 0 {
		rec.Bridge = BridgeOf(r.Quarantined, ev.Partition, ev.ModelSeq, ev.Prev)
	}
	return rec, nil
}

// skipped tells whether the message is a quarantine notice, a quarantined
// message, a fence record or a fence check, and returns its Skip.
func (r *MessageReader) skipped(seq Seq, subject string, data []byte) (*Skip, bool, error) {
	if subject == QuarantineSubject(r.Name) {
		q, err := DecodeQuarantine(data)
		switch {
		case err != nil:
			return nil, false, fmt.Errorf("ledger %q seq %d (quarantine notice): %w", r.Name, seq, err)
		case q.Ledger != r.UUID:
			return nil, false, fmt.Errorf("ledger %q seq %d: quarantine notice of ledger %s: %w", r.Name, seq, q.Ledger, ErrLineage)
		case q.Seq >= seq:
			return nil, false, fmt.Errorf("ledger %q seq %d: quarantine notice of a later seq %d: %w", r.Name, seq, q.Seq, ErrInvalid)
		}
		return &Skip{Notice: true, Quarantine: q}, true, nil
	}
	if q, ok := r.Quarantined[seq]; ok {
		p, _ := PartitionFromSubject(r.Name, subject) // "" if the subject names no partition
		return &Skip{Partition: p, Quarantine: q}, true, nil
	}
	return r.fence(seq, subject, data)
}

// fence tells whether the message is a fence record or a fence check (a
// reserved subject), and returns its Skip; such a message that is not valid
// is an error, as a malformed event is.
func (r *MessageReader) fence(seq Seq, subject string, data []byte) (*Skip, bool, error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix(r.Name))
	switch {
	case !ok:
		return nil, false, nil
	case rest == FenceCheckToken:
		c, err := DecodeFenceCheck(data)
		switch {
		case err != nil:
			return nil, false, fmt.Errorf("ledger %q seq %d (fence check): %w", r.Name, seq, err)
		case c.Ledger != r.UUID:
			return nil, false, fmt.Errorf("ledger %q seq %d: fence check of ledger %s: %w", r.Name, seq, c.Ledger, ErrLineage)
		case c.Fence >= seq:
			return nil, false, fmt.Errorf("ledger %q seq %d: fence check of a later fence %d: %w", r.Name, seq, c.Fence, ErrInvalid)
		}
		return &Skip{Check: &c}, true, nil
	case strings.HasPrefix(rest, FenceTokenPrefix):
		f, err := DecodeFenceRecord(data)
		switch {
		case err != nil:
			return nil, false, fmt.Errorf("ledger %q seq %d (fence record): %w", r.Name, seq, err)
		case f.Ledger != r.UUID:
			return nil, false, fmt.Errorf("ledger %q seq %d: fence record of ledger %s: %w", r.Name, seq, f.Ledger, ErrLineage)
		case subject != FenceSubject(r.Name, f.Lock):
			return nil, false, fmt.Errorf("ledger %q seq %d: fence record of lock %q on subject %s: %w", r.Name, seq, clip(f.Lock), subject, ErrInvalid)
		}
		return &Skip{Fence: &f}, true, nil
	}
	return nil, false, nil
}

// NoticeOf returns the quarantine notice a message on subject holds, if it is
// a valid notice of this ledger stored after the seq it quarantines. A notice
// that is not valid is no notice: readers stop at it (a RecordError), and it can
// be quarantined in turn.
func (r *MessageReader) NoticeOf(seq Seq, subject string, data []byte) (Quarantine, bool) {
	if subject != QuarantineSubject(r.Name) {
		return Quarantine{}, false
	}
	q, err := DecodeQuarantine(data)
	if err != nil || q.Ledger != r.UUID || q.Seq >= seq {
		return Quarantine{}, false
	}
	return q, true
}
