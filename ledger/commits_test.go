package ledger

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// addOne adds r and returns the one commit it completes, if any.
func addOne(c *Commits, r Record) ([]Record, error) {
	var got []Record
	n := 0
	err := c.Add(r, func(recs []Record) error {
		got = recs
		n++
		return nil
	})
	if n > 1 {
		return nil, fmt.Errorf("%d commits completed by one record in strict mode", n)
	}
	return got, err
}

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
		got, err := addOne(&c, tc.r)
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
		got, err := addOne(&c, s.r)
		if err != nil || len(got) != s.want {
			t.Fatalf("Add(seq %d) = %d records, %v; want %d", s.r.Seq, len(got), err, s.want)
		}
	}
}

// In filtered mode a commit is handed out at the last part the reader gets
// (Until), or cut short by a record of another commit, an earlier seq or a
// skipped record; skipped records are handed out in no commit.
func TestCommitsFiltered(t *testing.T) {
	t.Parallel()
	type out struct {
		Seqs     []Seq
		Complete bool
	}
	skip := Record{Seq: 9, Skip: &Skip{Partition: "p"}}
	for _, tc := range []struct {
		name  string
		until func(Record) (Seq, error)
		in    []Record
		want  []out
		open  int
	}{
		{"single parts", nil, []Record{part(1, "c1", 1, 1), part(2, "c2", 1, 1)},
			[]out{{[]Seq{1}, true}, {[]Seq{2}, true}}, 0},
		{"multi part", nil, []Record{part(1, "c1", 1, 3), part(2, "c1", 2, 3), part(3, "c1", 3, 3)},
			[]out{{[]Seq{1, 2, 3}, true}}, 0},
		{"a later part filtered out", nil, []Record{part(1, "c1", 1, 3), part(4, "c2", 1, 1)},
			[]out{{[]Seq{1}, false}, {[]Seq{4}, true}}, 0},
		{"until the last part received", func(Record) (Seq, error) { return 2, nil },
			[]Record{part(1, "c1", 1, 3), part(2, "c1", 2, 3)}, []out{{[]Seq{1, 2}, false}}, 0},
		{"started inside a commit", nil, []Record{part(2, "c1", 2, 3), part(3, "c1", 3, 3)},
			[]out{{[]Seq{2, 3}, false}}, 0},
		{"delivered again", nil, []Record{part(1, "c1", 1, 2), part(1, "c1", 1, 2)},
			[]out{{[]Seq{1}, false}}, 1},
		{"a skipped record cuts the open commit", nil, []Record{part(8, "c1", 1, 3), skip, part(10, "c1", 3, 3)},
			[]out{{[]Seq{8}, false}, {[]Seq{10}, false}}, 0},
		{"open at the end", nil, []Record{part(1, "c1", 1, 2)}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Commits{Filtered: true, Until: tc.until}
			var got []out
			for _, r := range tc.in {
				err := c.Add(r, func(recs []Record) error {
					var seqs []Seq
					for _, r := range recs {
						seqs = append(seqs, r.Seq)
					}
					got = append(got, out{seqs, len(recs) == recs[0].Event.Parts})
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("commits (-want +got):\n%s", diff)
			}
			if n := len(c.Pending()); n != tc.open {
				t.Errorf("pending = %d records, want %d", n, tc.open)
			}
		})
	}
	// Until's error is Add's.
	c := Commits{Filtered: true, Until: func(Record) (Seq, error) { return 0, ErrTruncated }}
	if err := c.Add(part(1, "c1", 1, 2), func([]Record) error { return nil }); !errors.Is(err, ErrTruncated) {
		t.Errorf("Add with a failing Until = %v", err)
	}
}
