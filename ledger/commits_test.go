package ledger

import (
	"errors"
	"testing"
)

func part(seq Seq, commit string, part, parts int) Record {
	return Record{Seq: seq, Event: Event{Commit: commit, Part: part, Parts: parts}}
}

// Commits hands out each commit once its last part is read, and refuses
// whatever breaks the contiguity rule without losing what it holds.
func TestCommits(t *testing.T) {
	t.Parallel()
	var c Commits
	for _, tc := range []struct {
		r    Record
		want int // records of the completed commit; 0: none yet
		err  error
	}{
		{part(1, "a", 1, 1), 1, nil},
		{part(2, "b", 1, 3), 0, nil},
		{part(3, "c", 1, 1), 0, ErrInvalid},   // b's part 2 must come next
		{part(3, "b", 3, 3), 0, ErrInvalid},   // not part 3
		{part(4, "b", 2, 3), 0, ErrInvalid},   // not at seq 3
		{part(3, "b", 2, 3), 0, nil},          // as it must
		{part(4, "b", 3, 3), 3, nil},          // b complete
		{part(5, "d", 2, 2), 0, ErrInvalid},   // a commit starts with part 1
		{part(7, "d", 1, 1), 0, ErrTruncated}, // seqs 5, 6 missing
		{part(5, "d", 1, 2), 0, nil},
	} {
		got, err := c.Add(tc.r)
		if !errors.Is(err, tc.err) || tc.err == nil && err != nil || len(got) != tc.want {
			t.Fatalf("Add(seq %d, part %d/%d of %s) = %d records, %v; want %d, %v",
				tc.r.Seq, tc.r.Event.Part, tc.r.Event.Parts, tc.r.Event.Commit, len(got), err, tc.want, tc.err)
		}
		for i, r := range got {
			if r.Event.Part != i+1 || r.CommitSeq() != tc.r.Seq {
				t.Fatalf("commit %v: record %d is part %d ending at %d", got, i, r.Event.Part, r.CommitSeq())
			}
		}
	}
	if p := c.Pending(); len(p) != 1 || p[0].Seq != 5 {
		t.Fatalf("Pending = %v, want the first part of d", p)
	}
}

func TestFollows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b PartOf
		want bool
	}{
		{PartOf{"a", 1, 1}, PartOf{"b", 1, 2}, true},
		{PartOf{"a", 1, 1}, PartOf{"b", 2, 2}, false},
		{PartOf{"a", 1, 2}, PartOf{"a", 2, 2}, true},
		{PartOf{"a", 1, 2}, PartOf{"b", 1, 1}, false},
		{PartOf{"a", 1, 2}, PartOf{"a", 2, 3}, false},
		{PartOf{"a", 2, 2}, PartOf{"a", 1, 2}, true}, // after a last part, any part 1
	} {
		if got := Follows(tc.a, tc.b); got != tc.want {
			t.Errorf("Follows(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// A skipped record (a quarantined message) ends the commit it cuts short, and
// the record after it is not held to the rule.
func TestCommitsSkip(t *testing.T) {
	t.Parallel()
	var c Commits
	skip := func(seq Seq) Record { return Record{Seq: seq, Skip: &Skip{Partition: "p"}} }
	steps := []struct {
		r    Record
		want int
	}{
		{part(1, "a", 1, 3), 0},
		{skip(2), 2},            // a's part 2 quarantined: a ends here, cut short
		{part(3, "a", 3, 3), 1}, // a's part 3 alone
		{skip(4), 1},
		{part(5, "b", 2, 2), 1},
	}
	for _, s := range steps {
		got, err := c.Add(s.r)
		if err != nil || len(got) != s.want {
			t.Fatalf("Add(seq %d) = %d records, %v; want %d", s.r.Seq, len(got), err, s.want)
		}
	}
}
