package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// FormatVersion is the event format this code writes and the only one it reads.
const FormatVersion = 1

// Seq is a JetStream stream sequence number. Seqs are gapless in the stream; 0 means
// "none" (before the first event).
type Seq uint64

// Digest is a SHA-256 content hash.
type Digest [sha256.Size]byte

// DigestOf returns the SHA-256 of b.
func DigestOf(b []byte) Digest { return sha256.Sum256(b) }

// ParseDigest parses a 64-character lower-case hex SHA-256.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 2*len(d) {
		return d, fmt.Errorf("parse digest %q: want %d hex characters: %w", s, 2*len(d), ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return d, fmt.Errorf("parse digest %q: not lower-case hex: %w", s, ErrInvalid)
		}
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("parse digest %q: %w", s, ErrInvalid)
	}
	return d, nil
}

// String returns the lower-case hex form.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether d is the zero digest (no content).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Entry is one file of the datastore as a commit records it: a write (path, content
// hash, size, permission bits) or a deletion.
type Entry struct {
	Path    string // datastore-relative, slash-separated; see ValidatePath
	SHA256  Digest // content hash; zero for a deletion
	Size    int64  // bytes; 0 for a deletion
	Mode    uint32 // permission bits (0o644 …); 0 for a deletion
	Deleted bool
}

// Commit is a set of entries written by one host at once.
type Commit struct {
	ID      string // UUID v7; see NewCommitID
	Host    string
	At      time.Time
	Message string
	Entries []Entry
}

// Event is one message of the log: the part of a commit that touches one partition.
type Event struct {
	V         int       // format version; FormatVersion
	Ledger    string    // the ledger's UUID (its lineage)
	Commit    string    // commit UUID
	Host      string    // host id of the committer
	At        time.Time // commit time, as the committer's clock saw it
	Message   string    // optional commit message
	Partition string    // partition key (see PartitionKey)
	ModelSeq  uint64    // position in the partition's chain, from 1
	Prev      Seq       // stream seq of the partition's previous event; 0 for ModelSeq 1
	Parts     int       // how many partitions (events) the commit touches
	Part      int       // this event's position in the commit, 1..Parts
	Entries   []Entry   // inline entries; empty when Manifest is set
	Manifest  Digest    // blob holding the entries (JSON array) when too large to inline
}

// Record is an event as stored in the log.
type Record struct {
	Seq   Seq
	Event Event
	// Skip is set, and Event empty, on a record no reader applies: a
	// quarantined message or a quarantine notice (see Quarantine).
	Skip *Skip
	// Bridge is set on an event whose Prev is a quarantined event of its
	// partition, a link every reader knows is skipped (Quarantine.Link): the
	// event follows, in every reader's chain, the last event before the
	// quarantined run.
	Bridge *Bridge
}

// Bridge is where a partition's chain goes on past quarantined events (see
// Record.Bridge): the seq and modelSeq of the last event before them.
type Bridge struct {
	Prev     Seq
	ModelSeq uint64
}

// BridgeOf returns the Bridge of an event of partition with modelSeq and prev
// given the quarantine notices by quarantined seq: nil unless prev is a
// quarantined event of the partition whose notice records its link, and so on
// back through a run of them, each one modelSeq below the next.
func BridgeOf(qs map[Seq]Quarantine, partition string, modelSeq uint64, prev Seq) *Bridge {
	p, ms := prev, modelSeq-1
	for n := 0; ; n++ {
		q, ok := qs[p]
		switch {
		case !ok && n == 0:
			return nil
		case !ok:
			return &Bridge{Prev: p, ModelSeq: ms}
		case !q.Linked() || q.Partition != partition || q.ModelSeq != ms || ms == 0:
			return nil
		}
		p, ms = q.Prev, ms-1
	}
}

// LastOfCommit reports whether r is the last part of its commit. A skipped
// record is a commit of its own.
func (r Record) LastOfCommit() bool { return r.Skip != nil || r.Event.Part == r.Event.Parts }
