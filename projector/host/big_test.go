package host

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestBigCommit is the acceptance case: one commit of 100,000 small files
// over 200 partitions (one atomic batch of 200 events), synced by another host.
// It creates 100,000 files twice, so it runs when SYNCLEDGER_TEST_BIG=1 (.ci/run
// sets it, with TMPDIR on a fast file system); otherwise it runs 2,000 files
// over 200 partitions.
func TestBigCommit(t *testing.T) {
	t.Parallel()
	files, parts := 2_000, 200
	if os.Getenv("SYNCLEDGER_TEST_BIG") != "" {
		files = 100_000
	}
	e := newEnv(t)
	a, b := e.host("a"), e.host("b")
	for i := range files {
		writeFile(t, a, fmt.Sprintf("data/t/m%03d/d/%d/raw", i%parts, i), fmt.Sprint(i))
	}
	start := time.Now()
	res, err := a.Commit(context.Background(), CommitOptions{Message: "big"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("commit of %d files over %d partitions: %v", files, parts, time.Since(start))
	if res.Written != files || len(res.Seqs) != parts || len(res.Partitions) != parts {
		t.Fatalf("commit wrote %d files in %d events over %d partitions", res.Written, len(res.Seqs), len(res.Partitions))
	}
	for i := 1; i < len(res.Seqs); i++ {
		if res.Seqs[i] != res.Seqs[i-1]+1 {
			t.Fatalf("seqs %v not consecutive: not one atomic batch", res.Seqs)
		}
	}
	start = time.Now()
	sr := mustSync(t, b, SyncOptions{})
	t.Logf("sync of %d files: %v", files, time.Since(start))
	if sr.Written != files || sr.HWM != res.Seqs[len(res.Seqs)-1] {
		t.Fatalf("sync %+v", sr)
	}
	if v, err := b.Verify(context.Background()); err != nil || !v.OK() || v.Checked != files {
		t.Fatalf("verify: %+v %v", v, err)
	}
}
