package projector

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "seed of the property tests and the simulator (0: a new one, logged)")
	propCases = flag.Int("props", 300_000, "SafeHWM evaluations in TestSafeHWMMatchesNaive")
)

// testSeed returns the -seed flag or a fresh seed, and logs it so a failure can
// be replayed with -seed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./projector -run '%s$' -seed %d)", s, t.Name(), s)
	return s
}

// naiveSafeHWM is SafeHWM's definition, literally: the largest candidate H that
// is a commit end and has every seq of (hwm, H] processed.
func naiveSafeHWM(hwm ledger.Seq, done []Done) ledger.Seq {
	present := map[ledger.Seq]bool{}
	end := map[ledger.Seq]bool{}
	for _, d := range done {
		present[d.Seq] = true
		end[d.Seq] = end[d.Seq] || d.CommitEnd
	}
	best := hwm
	for _, d := range done {
		h := d.Seq
		if h <= best || !end[h] {
			continue
		}
		all := true
		for s := hwm + 1; s <= h; s++ {
			if !present[s] {
				all = false
				break
			}
		}
		if all {
			best = h
		}
	}
	return best
}

// randomCase returns an hwm and processed seqs in the order they are processed:
// a log of commits of random sizes, a random subset of its seqs (holes),
// duplicated now and then, in random order, and sometimes seqs at or below hwm
// or commit-end flags that contradict the log (SafeHWM must take any input).
func randomCase(r *rand.Rand) (ledger.Seq, []Done) {
	n := 1 + r.IntN(16)
	end := make([]bool, n+1)
	maxSize := 1 + r.IntN(4)
	for s := 1; s <= n; {
		s += 1 + r.IntN(maxSize)
		end[min(s-1, n)] = true
	}
	var hwm ledger.Seq
	if r.IntN(3) > 0 {
		for s := r.IntN(n + 1); s > 0; s-- { // a commit end, usually
			if end[s] || r.IntN(10) == 0 {
				hwm = ledger.Seq(s)
				break
			}
		}
	}
	keep := 0.3 + 0.7*r.Float64()
	var done []Done
	for s := 1; s <= n; s++ {
		if r.Float64() > keep {
			continue
		}
		d := Done{Seq: ledger.Seq(s), CommitEnd: end[s]}
		if r.IntN(40) == 0 {
			d.CommitEnd = !d.CommitEnd
		}
		done = append(done, d)
		if r.IntN(5) == 0 {
			done = append(done, d)
		}
	}
	r.Shuffle(len(done), func(i, j int) { done[i], done[j] = done[j], done[i] })
	return hwm, done
}

// TestSafeHWMMatchesNaive checks SafeHWM against its definition on growing sets of
// processed seqs, and that it never decreases and composes (advancing in steps
// gives the same HWM as in one go, which is how the core uses it).
func TestSafeHWMMatchesNaive(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cases := 0
	for cases < *propCases {
		hwm, order := randomCase(r)
		prev, stepped := hwm, hwm
		for i := 0; i <= len(order); i++ {
			set := order[:i]
			got, want := SafeHWM(hwm, set), naiveSafeHWM(hwm, set)
			cases++
			if got != want {
				t.Fatalf("seed %d: SafeHWM(%d, %v) = %d, naive %d", seed, hwm, set, got, want)
			}
			if got < prev {
				t.Fatalf("seed %d: SafeHWM decreased from %d to %d when %v was added", seed, prev, got, order[i-1])
			}
			if stepped = SafeHWM(stepped, set); stepped != got {
				t.Fatalf("seed %d: stepwise SafeHWM %d, in one go %d (hwm %d, %v)", seed, stepped, got, hwm, set)
			}
			prev = got
		}
	}
	t.Logf("%d cases", cases)
}

func TestSafeHWMDoesNotModifyInput(t *testing.T) {
	done := []Done{{3, true}, {1, false}, {2, false}}
	in := slices.Clone(done)
	if got := SafeHWM(0, done); got != 3 {
		t.Fatalf("SafeHWM = %d, want 3", got)
	}
	if !slices.Equal(done, in) {
		t.Fatalf("input reordered: %v", done)
	}
}

func ExampleSafeHWM() {
	// Commits: seq 1 alone; seqs 2-3 (two partitions); seq 4 alone.
	// Processed: 1, then both parts of 2-3, and 4 is not read yet...
	fmt.Println(SafeHWM(0, []Done{{1, true}, {3, true}, {2, false}}))
	// ...only the first part of 2-3 was read: the HWM stays at 1.
	fmt.Println(SafeHWM(0, []Done{{1, true}, {2, false}}))
	// A hole at 2: later commits do not count.
	fmt.Println(SafeHWM(0, []Done{{1, true}, {3, true}, {4, true}}))
	// Output:
	// 3
	// 1
	// 1
}
