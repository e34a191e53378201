package ledger

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// BridgeOf follows a run of quarantined events of the partition back from an
// event's prev, each one modelSeq below the next, to the event before them.
func TestBridgeOf(t *testing.T) {
	link := func(seq Seq, p string, ms uint64, prev Seq) Quarantine {
		return Quarantine{Seq: seq, Partition: p, ModelSeq: ms, Prev: prev}
	}
	qs := map[Seq]Quarantine{
		4:  link(4, "p", 2, 2),
		6:  link(6, "p", 3, 4), // 6 → 4 → 2: a run of two
		8:  {Seq: 8},           // an undecodable message: no link
		9:  link(9, "q", 1, 0), // q's first event
		10: link(10, "p", 9, 6),
	}
	for _, tc := range []struct {
		name string
		p    string
		ms   uint64
		prev Seq
		want *Bridge
	}{
		{"prev not quarantined", "p", 3, 2, nil},
		{"one link", "p", 3, 4, &Bridge{Prev: 2, ModelSeq: 1}},
		{"a run of two", "p", 4, 6, &Bridge{Prev: 2, ModelSeq: 1}},
		{"another partition's link", "q", 4, 6, nil},
		{"a modelSeq that does not follow", "p", 5, 6, nil},
		{"a message without a link", "p", 3, 8, nil},
		{"back to the partition's start", "q", 2, 9, &Bridge{Prev: 0, ModelSeq: 0}},
		{"a link whose own modelSeq lies", "p", 10, 10, nil},
	} {
		if got := BridgeOf(qs, tc.p, tc.ms, tc.prev); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: BridgeOf(%s, %d, %d) = %+v, want %+v", tc.name, tc.p, tc.ms, tc.prev, got, tc.want)
		}
	}
}
