package faulty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// Workload is what Exercise does to a blob store under faults.
type Workload struct {
	Seed     uint64
	Blobs    int // blobs to put; 0 means 40
	MaxSize  int // largest blob; 0 means 300 KiB (sizes vary from 0 up)
	Parallel int // concurrent puts and gets; 0 means 4
	Retry    *ledger.RetryPolicy
	// MinPutSuccess is the share of puts that must succeed (with retries under
	// the fault rate used); 0 means no floor.
	MinPutSuccess float64
}

// Result counts what Exercise saw.
type Result struct {
	Puts, PutsFailed         int
	Gets, GetsFailed         int
	ChecksumRefused          int // gets whose content did not verify: a truncated or altered body caught (I5)
	PartialVisibleAfterError int // failed puts whose blob is nevertheless stored, verified (a lost ack)
}

func (r Result) String() string {
	return fmt.Sprintf("puts %d (%d failed), gets %d (%d failed, %d refused by checksum), failed puts stored anyway %d",
		r.Puts, r.PutsFailed, r.Gets, r.GetsFailed, r.ChecksumRefused, r.PartialVisibleAfterError)
}

// Exercise puts and reads blobs through a ledger.Bucket over the driver faulty
// (with w.Retry's retries when set, else none), then checks against clean —
// the driver of the same storage without faults — that:
//
//   - every put either succeeded or returned an error naming the blob;
//   - every get returned the exact content or an error: never other bytes
//     (a truncated body fails with ErrChecksum or a transport error, I5);
//   - every blob whose put succeeded is stored, and reads back verified;
//   - a blob whose put failed is absent or stored whole (never partial: a
//     reference to it would be to a blob that does not verify, I6);
//   - with retries, at least w.MinPutSuccess of the puts succeeded.
func Exercise(t testing.TB, ctx context.Context, faulty, clean driver.Bucket, w Workload) Result {
	t.Helper()
	if w.Blobs == 0 {
		w.Blobs = 40
	}
	if w.MaxSize == 0 {
		w.MaxSize = 300 << 10
	}
	if w.Parallel == 0 {
		w.Parallel = 4
	}
	policy := ledger.RetryPolicy{Attempts: 1}
	if w.Retry != nil {
		policy = *w.Retry
	}
	bs := ledger.NewBucket(faulty, policy)
	r := rand.New(rand.NewPCG(w.Seed, w.Seed^0xfa17))
	contents := make([][]byte, w.Blobs)
	for i := range contents {
		n := r.IntN(w.MaxSize + 1)
		if i%7 == 0 {
			n = r.IntN(64)
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		contents[i] = b
	}

	var (
		mu  sync.Mutex
		res Result
		ok  = make([]bool, w.Blobs)
	)
	var g errgroup.Group
	g.SetLimit(w.Parallel)
	each := func(f func(i int)) {
		for i := range w.Blobs {
			g.Go(func() error { f(i); return nil })
		}
		g.Wait()
	}
	each(func(i int) {
		d := ledger.DigestOf(contents[i])
		err := bs.Put(ctx, d, bytes.NewReader(contents[i]), int64(len(contents[i])))
		mu.Lock()
		defer mu.Unlock()
		res.Puts++
		if err != nil {
			res.PutsFailed++
			if !strings.Contains(err.Error(), d.String()) {
				t.Errorf("put of blob %d failed with an error that does not name it: %v", i, err)
			}
			return
		}
		ok[i] = true
	})
	each(func(i int) {
		if !ok[i] {
			return
		}
		d := ledger.DigestOf(contents[i])
		got, err := ledger.ReadBlob(ctx, bs, d)
		mu.Lock()
		defer mu.Unlock()
		res.Gets++
		switch {
		case err == nil && !bytes.Equal(got, contents[i]):
			t.Errorf("I5: get of blob %d returned %d bytes that are not its content (%d bytes), without an error", i, len(got), len(contents[i]))
		case errors.Is(err, ledger.ErrChecksum):
			res.GetsFailed++
			res.ChecksumRefused++
		case err != nil:
			res.GetsFailed++
		}
	})
	cleanBlobs := ledger.NewBucket(clean, ledger.RetryPolicy{Attempts: 1})
	for i, b := range contents {
		d := ledger.DigestOf(b)
		got, err := ledger.ReadBlob(ctx, cleanBlobs, d)
		switch {
		case ok[i] && err != nil:
			t.Errorf("blob %d: put succeeded, but it does not read back: %v", i, err)
		case ok[i] && !bytes.Equal(got, b):
			t.Errorf("blob %d: put succeeded, but it reads back as other content", i)
		case !ok[i] && err == nil:
			res.PartialVisibleAfterError++ // stored whole and verified, only the answer was lost
		case !ok[i] && !errors.Is(err, ledger.ErrNotFound):
			t.Errorf("blob %d: failed put left a blob that does not verify: %v", i, err)
		}
	}
	if w.MinPutSuccess > 0 {
		if got := float64(res.Puts-res.PutsFailed) / float64(res.Puts); got < w.MinPutSuccess {
			t.Errorf("only %.0f%% of puts succeeded with retries, want at least %.0f%% (%v)", 100*got, 100*w.MinPutSuccess, res)
		}
	}
	return res
}
