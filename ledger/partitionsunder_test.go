package ledger

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Every ancestor directory of a path names the path's partition
// (PartitionsUnder never leaves one out), over random paths whose segments
// exercise each of PartitionKey's rules, "--" inside names included.
func TestPartitionsUnderHoldsEveryKey(t *testing.T) {
	segs := []string{"data", "outputs", "definitions-evaluated", "workflow-runs", "logs", "a", "b", "a--b", "--", "-", "x-", "latest", "raw", "1"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		n := 1 + rng.IntN(8)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = segs[rng.IntN(len(segs))]
		}
		rel := strings.Join(parts, "/")
		key := PartitionKey(rel)
		for i := range n {
			dir := strings.Join(parts[:i], "/")
			exact, prefix, any := PartitionsUnder(dir)
			if !any && !slices.Contains(exact, key) && (prefix == "" || !strings.HasPrefix(key, prefix)) {
				t.Fatalf("PartitionsUnder(%q) = %q, %q: leaves out %q, the partition of %q", dir, exact, prefix, key, rel)
			}
		}
	}
}

// A model's directory holds none of another model's partitions: what lets a
// commit of some partitions skip the rest of the tree.
func TestPartitionsUnderExcludes(t *testing.T) {
	for _, c := range []struct {
		dir, key string
		want     bool
	}{
		{"data/t/id1", "data--t--id1", true},
		{"data/t/id1", "data--t--id2", false},
		{"data/t/id1", "data--t--id1--name", true},
		{"data/t", "data--t--id2", true},
		{"data/t", "data", true},
		{"data/t", "outputs--t--id", false},
		{"data/t/id1/x", "data", false},
		{"workflow-runs", "workflow-runs--w", true},
		{"workflow-runs/w", "workflow-runs--v", false},
		{"logs/x", "logs", true},
		{"logs/x", "data--t--id1", false},
		{"", "anything", true},
	} {
		exact, prefix, any := PartitionsUnder(c.dir)
		got := any || slices.Contains(exact, c.key) || (prefix != "" && strings.HasPrefix(c.key, prefix))
		if got != c.want {
			t.Errorf("PartitionsUnder(%q) = %q, %q, %v: holds %q = %v, want %v", c.dir, exact, prefix, any, c.key, got, c.want)
		}
	}
}
