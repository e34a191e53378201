package consumers

import (
	"fmt"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Commit is one commit as a consumer sees it: the records of the commit it
// receives (all of the commit's parts, or those of the partitions it filters on),
// in seq order.
type Commit struct {
	Seq     ledger.Seq // the commit's seq: the seq of its last part, even when that part is filtered out
	ID      string     // commit UUID
	Host    string
	At      time.Time
	Message string
	Parts   int             // partitions the whole commit touches
	Records []ledger.Record // the parts received, in seq order; at least one
}

// NewCommit builds a Commit from records of one commit in seq order. It checks
// that they are parts of one commit: errors wrap ledger.ErrInvalid.
func NewCommit(recs []ledger.Record) (Commit, error) {
	if len(recs) == 0 {
		return Commit{}, fmt.Errorf("new commit: no records: %w", ledger.ErrInvalid)
	}
	first := recs[0]
	e := first.Event
	c := Commit{
		Seq: first.CommitSeq(), ID: e.Commit, Host: e.Host, At: e.At, Message: e.Message,
		Parts: e.Parts, Records: recs,
	}
	for i, r := range recs {
		switch {
		case r.Event.Commit != c.ID:
			return Commit{}, fmt.Errorf("new commit %s: record %d is of commit %s: %w", c.ID, i, r.Event.Commit, ledger.ErrInvalid)
		case r.CommitSeq() != c.Seq:
			return Commit{}, fmt.Errorf("new commit %s: seq %d (part %d of %d) does not end at seq %d: %w", c.ID, r.Seq, r.Event.Part, r.Event.Parts, c.Seq, ledger.ErrInvalid)
		case i > 0 && r.Seq <= recs[i-1].Seq:
			return Commit{}, fmt.Errorf("new commit %s: seqs out of order at %d: %w", c.ID, r.Seq, ledger.ErrInvalid)
		}
	}
	return c, nil
}

// Complete reports whether c holds every part of the commit.
func (c Commit) Complete() bool { return len(c.Records) == c.Parts }

// Partitions returns the partitions of the records c holds, in seq order.
func (c Commit) Partitions() []string {
	out := make([]string, len(c.Records))
	for i, r := range c.Records {
		out[i] = r.Event.Partition
	}
	return out
}

// Group adds r to g (the one grouper, ledger.Commits) and returns the commits
// r completes, for readers of a log that are not durable consumers (tail, the
// dashboard): filtered, a read may start inside a commit.
func Group(g *ledger.Commits, r ledger.Record) ([]Commit, error) {
	var out []Commit
	err := g.Add(r, func(recs []ledger.Record) error {
		c, err := NewCommit(recs)
		if err == nil {
			out = append(out, c)
		}
		return err
	})
	return out, err
}
