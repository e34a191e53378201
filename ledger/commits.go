package ledger

import (
	"context"
	"fmt"
)

// The contiguity rule. A commit of k partitions is stored as one atomic batch:
// its parts 1..k at k consecutive seqs, and the commit's seq is its last part's.
// So the record at the seq right after part j < k of a commit is part j+1 of the
// same commit, and the record right after a last part is part 1 of another
// commit. Readers that see every record (a full read of the log) hold the log to
// this rule through Follows and Commits; readers that see some partitions only
// (a filtered consumer) still know where each commit ends (CommitSeq).

// CommitSeq returns the seq of r's commit: the seq of its last part, which r's
// Part and Parts place at r.Seq + Parts - Part.
func (r Record) CommitSeq() Seq { return r.Seq + Seq(r.Event.Parts-r.Event.Part) }

// PartOf names one part of a commit: what the contiguity rule looks at.
type PartOf struct {
	Commit      string
	Part, Parts int
}

// Part returns the part of its commit r is.
func (r Record) Part() PartOf { return PartOf{r.Event.Commit, r.Event.Part, r.Event.Parts} }

// Follows reports whether b may be stored at the seq right after a: the next
// part of a's commit, or, a being its commit's last part, the first part of
// another commit.
func Follows(a, b PartOf) bool {
	if a.Part == a.Parts {
		return b.Part == 1
	}
	return b == PartOf{a.Commit, a.Part + 1, a.Parts}
}

// Commits groups records read in seq order into commits: the one grouper of
// every reader (full reads, consumers, tail, log, the dashboard). Its zero value
// is in strict mode, ready for a full read of the log that starts at a commit
// boundary (the first record is a part 1); with Filtered set it takes some of
// the log's records.
type Commits struct {
	// Filtered takes records of some of the log's seqs, in seq order (a
	// partition filter's, or a read that starts inside a commit); the
	// contiguity rule is not checked. A commit is handed out when the last of
	// its parts the reader receives arrives (Until), or, cut short, when a
	// record of another commit, an earlier seq or a skipped record comes
	// first. A skipped record is part of no commit: it is not handed out.
	Filtered bool
	// Until, in filtered mode, returns the seq of the last part of r's commit
	// the reader will receive, for r the first record received of a commit
	// with parts after it; nil means the commit's last part (CommitSeq).
	Until func(r Record) (Seq, error)

	recs []Record
	last Record // the record added last; Seq 0 before the first
	want Seq    // filtered: the open commit is complete at this seq
}

// Add takes the next record and calls fn with each commit it completes: the
// commit's records, a new slice, fn's to keep (strict: when r is its commit's
// last part; filtered: see Filtered). Errors from fn and Until are returned as
// they are. In strict mode, a record that breaks the contiguity rule (not the
// part that must come next, or not at the seq after the last one) is refused
// with an error wrapping ErrInvalid, and the Commits is left as it was; seqs
// missing between two commits (events retention dropped) are a
// *TruncatedError; a skipped record (ledger.Skip) ends the commit it cuts
// short, with it.
func (c *Commits) Add(r Record, fn func([]Record) error) error {
	if c.Filtered {
		return c.addFiltered(r, fn)
	}
	prev := c.last
	if prev.Seq != 0 && r.Seq != prev.Seq+1 {
		if r.Seq > prev.Seq+1 && prev.LastOfCommit() {
			// Whole commits missing between two: retention dropped them.
			return &TruncatedError{From: prev.Seq + 1, First: r.Seq}
		}
		return fmt.Errorf("seq %d (part %d/%d of commit %s) follows seq %d: %w",
			r.Seq, r.Event.Part, r.Event.Parts, r.Event.Commit, prev.Seq, ErrInvalid)
	}
	// A skipped record (ledger.Skip) ends the commit it cuts short, and the
	// record after it may be a later part of a commit whose first part was
	// quarantined: neither is held to the rule.
	if r.Skip == nil && prev.Skip == nil {
		from := PartOf{Part: 1, Parts: 1} // the read starts at a commit boundary
		if prev.Seq != 0 {
			from = prev.Part()
		}
		if !Follows(from, r.Part()) {
			return fmt.Errorf("seq %d (part %d/%d of commit %s) follows part %d/%d of commit %s: %w",
				r.Seq, r.Event.Part, r.Event.Parts, r.Event.Commit, from.Part, from.Parts, from.Commit, ErrInvalid)
		}
	}
	c.last = r
	c.recs = append(c.recs, r)
	if !r.LastOfCommit() {
		return nil
	}
	return c.take(fn)
}

func (c *Commits) addFiltered(r Record, fn func([]Record) error) error {
	if len(c.recs) > 0 && (r.Skip != nil || r.Event.Commit != c.recs[0].Event.Commit || r.Seq <= c.last.Seq) {
		if err := c.take(fn); err != nil {
			return err
		}
	}
	c.last = r
	if r.Skip != nil {
		return nil
	}
	if len(c.recs) == 0 {
		c.want = r.CommitSeq()
		if c.Until != nil && r.Seq < c.want {
			want, err := c.Until(r)
			if err != nil {
				return err
			}
			c.want = want
		}
	}
	c.recs = append(c.recs, r)
	if r.Seq < c.want {
		return nil
	}
	return c.take(fn)
}

// take hands out the open commit.
func (c *Commits) take(fn func([]Record) error) error {
	out := c.recs
	c.recs = nil
	return fn(out)
}

// Pending returns the records held of a commit not yet complete (the log's
// reader may see the first parts of an atomic batch before the last is
// stored; a filtered read may end inside a commit).
func (c *Commits) Pending() []Record { return c.recs }

// ReadCommits reads the log from seq from to seq to (0: its last seq now), as
// CommitLog.Read does, and calls fn with each complete commit's records, in
// order. The read must start at a commit boundary. A commit whose last part is
// beyond to (or not yet readable) is not passed to fn. Errors from fn end the
// read and are returned as they are.
func ReadCommits(ctx context.Context, log CommitLog, from, to Seq, fn func([]Record) error) error {
	var c Commits
	return log.Read(ctx, from, to, func(r Record) error { return c.Add(r, fn) })
}
