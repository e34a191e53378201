package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/statedb"
)

// layout is a swamp-like datastore: Models models with PerModel files of Size
// bytes each, at data/@test/model-type-NNN/<uuid>/file-NNNN.json (5 segments,
// so each model's files are one partition, data--@test--model-type-NNN--<uuid>).
type layout struct {
	Models, PerModel, Size int
}

func (l layout) Files() int { return l.Models * l.PerModel }

// layoutOf spreads n files over models of 20 files each (the 1,000-file layout
// is 50 models), as a growing swamp datastore grows by models.
func layoutOf(n, size int) layout {
	const perModel = 20
	return layout{Models: max(1, n/perModel), PerModel: min(n, perModel), Size: size}
}

func modelType(m int) string { return fmt.Sprintf("@test/model-type-%03d", m) }
func modelID(m int) string   { return fmt.Sprintf("00000000-0000-4000-8000-%012d", m) }

func filePath(m, f int) string {
	return fmt.Sprintf("data/%s/%s/file-%04d.json", modelType(m), modelID(m), f)
}

// modelKeys are the partitions a model-scoped sync reads (swamp's
// partitionKeysFromModel: data--, outputs--, definitions-evaluated--).
func modelKeys(m int) []string { return ledger.PartitionKeysForModel(modelType(m), modelID(m)) }

// content is file f of model m in generation gen: JSON of exactly size bytes.
func content(gen, m, f, size int) []byte {
	head := fmt.Sprintf(`{"gen":%d,"model":%d,"file":%d,"data":"`, gen, m, f)
	const tail = "\"}\n"
	n := max(0, size-len(head)-len(tail))
	raw := make([]byte, (n+1)/2)
	r := mrand.New(mrand.NewPCG(uint64(gen)<<32|uint64(m), uint64(f)))
	for i := 0; i < len(raw); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(raw); j++ {
			raw[i+j] = byte(v >> (8 * j))
		}
	}
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, hex.EncodeToString(raw)[:n]...)
	return append(b, tail...)
}

// writeTree writes the layout's files (generation gen) into a cache directory.
func writeTree(root string, l layout, gen int) error {
	for m := range l.Models {
		dir := filepath.Join(root, filepath.FromSlash(filepath.Dir(filePath(m, 0))))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for f := range l.PerModel {
			p := filepath.Join(root, filepath.FromSlash(filePath(m, f)))
			if err := os.WriteFile(p, content(gen, m, f, l.Size), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// seedLedger stores the layout's files (generation gen) as blobs with plain
// PUTs, 32 at a time, and appends them as commits of at most 50 models (one
// event per model, as a host's commit of those files would): the data set the
// sync rows read, without paying for host commits of 100,000 files.
func seedLedger(ctx context.Context, lg *natsjs.Log, objs driver.Bucket, l layout, gen int) error {
	type job struct{ m, f int }
	jobs := make(chan job)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	digests := make([][]ledger.Digest, l.Models)
	for m := range digests {
		digests[m] = make([]ledger.Digest, l.PerModel)
	}
	for range 32 {
		wg.Go(func() {
			for j := range jobs {
				b := content(gen, j.m, j.f, l.Size)
				d := ledger.DigestOf(b)
				digests[j.m][j.f] = d
				if err := objs.Put(ctx, ledger.BlobKey(d), bytes.NewReader(b), int64(len(b))); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for m := range l.Models {
		for f := range l.PerModel {
			jobs <- job{m, f}
		}
	}
	close(jobs)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("seed blobs: %w", err)
	}
	blobs := ledger.NewBucket(objs, noRetry)
	for first := 0; first < l.Models; first += 50 {
		models := min(50, l.Models-first)
		id, err := ledger.NewCommitID(rand.Reader)
		if err != nil {
			return err
		}
		events := make([]ledger.Event, models)
		for i := range models {
			m := first + i
			ev := ledger.Event{
				V: ledger.FormatVersion, Ledger: lg.UUID(), Commit: id, Host: "seed", At: time.Now(),
				Partition: ledger.PartitionKey(filePath(m, 0)), ModelSeq: 1, Parts: models, Part: i + 1,
			}
			for f := range l.PerModel {
				ev.Entries = append(ev.Entries, ledger.Entry{Path: filePath(m, f), SHA256: digests[m][f], Size: int64(l.Size), Mode: 0o644})
			}
			events[i] = ev
		}
		if _, err := ledger.Publish(ctx, lg, blobs, events); err != nil {
			return fmt.Errorf("seed commit: %w", err)
		}
	}
	return nil
}

// buildIndex writes a cache's state database directly (statedb): n index
// entries over n/20 partitions, lineage and HWM set as after a full sync to
// head, and the commit a sync records there (top, the log's at head: the
// entries are no history's, so the check a cache without it gets once would
// find them another history's). The no-op sync reads none of the entries;
// this is how B1 gets caches of 10k–1M entries without committing a million
// files.
func buildIndex(dir string, info ledger.Info, head ledger.Seq, top string, n int) error {
	db, err := statedb.Open(filepath.Join(dir, ledger.StateDir, "state.db"), time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	l := layoutOf(n, 5120)
	const perTx = 50_000
	var d ledger.Digest
	for start := 0; start < l.Files(); start += perTx {
		err := db.Update(func(tx *statedb.Tx) error {
			for i := start; i < min(start+perTx, l.Files()); i++ {
				m, f := i/l.PerModel, i%l.PerModel
				d[0], d[1], d[2], d[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
				e := statedb.Entry{Digest: d, Size: int64(l.Size), Mode: 0o644, MTime: time.Unix(1700000000, int64(i)), Seq: head}
				if err := tx.Put(filePath(m, f), e); err != nil {
					return err
				}
				if f == 0 {
					if err := tx.PutMark(ledger.PartitionKey(filePath(m, 0)), projector.Mark{ModelSeq: 1, Seq: head}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("build index: %w", err)
		}
	}
	return db.Update(func(tx *statedb.Tx) error {
		if err := tx.SetLedger(info.UUID, info.Name); err != nil {
			return err
		}
		if err := tx.SetTopCommit(statedb.Commit{Seq: head, ID: top}); err != nil {
			return err
		}
		return tx.SetHWM(head)
	})
}

// lazyPath is a file swamp's lazy mode takes as metadata only (data/**/raw);
// its partition is the model's, like filePath's.
func lazyPath(m, f int) string {
	return fmt.Sprintf("data/%s/%s/file-%04d/1/raw", modelType(m), modelID(m), f)
}

// seedCommits publishes n single-event commits, each rewriting one of the
// layout's files (lazyPath) with new content, cycling over the files: a long
// history over a bounded datastore. The events are valid and chained (Prev, ModelSeq); they are
// published asynchronously without the Log's per-message checks, since only their
// reading is measured. No blob is stored: B9 reads metadata only.
func seedCommits(ctx context.Context, nc *nats.Conn, lg *natsjs.Log, l layout, n int) error {
	var (
		errMu  sync.Mutex
		pubErr error
	)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			errMu.Lock()
			pubErr = errors.Join(pubErr, err)
			errMu.Unlock()
		}))
	if err != nil {
		return err
	}
	type chain struct {
		modelSeq uint64
		last     ledger.Seq
	}
	chains := make([]chain, l.Models)
	at := time.Now().UTC()
	rnd := mrand.NewChaCha8([32]byte{9})
	for i := range n {
		m, f := i%l.Models, (i/l.Models)%l.PerModel
		p := lazyPath(m, f)
		id, err := ledger.NewCommitID(rnd)
		if err != nil {
			return err
		}
		var d ledger.Digest
		_, _ = rnd.Read(d[:])
		c := &chains[m]
		ev := ledger.Event{
			V: ledger.FormatVersion, Ledger: lg.UUID(), Commit: id, Host: "seed", At: at,
			Partition: ledger.PartitionKey(p), ModelSeq: c.modelSeq + 1, Prev: c.last, Parts: 1, Part: 1,
			Entries: []ledger.Entry{{Path: p, SHA256: d, Size: 5120, Mode: 0o644}},
		}
		b, err := ledger.EncodeEvent(ev)
		if err != nil {
			return err
		}
		c.modelSeq, c.last = c.modelSeq+1, ledger.Seq(i+1)
		if _, err := js.PublishAsync(ledger.Subject(lg.Name(), ev.Partition), b); err != nil {
			return err
		}
		if i%100_000 == 99_999 {
			if err := waitAsync(ctx, js); err != nil {
				return err
			}
		}
	}
	if err := waitAsync(ctx, js); err != nil {
		return err
	}
	errMu.Lock()
	defer errMu.Unlock()
	if pubErr != nil {
		return pubErr
	}
	last, err := lg.LastSeq(ctx)
	if err != nil {
		return err
	}
	if last != ledger.Seq(n) {
		return fmt.Errorf("seed: stream ends at seq %d, want %d", last, n)
	}
	return nil
}

func waitAsync(ctx context.Context, js jetstream.JetStream) error {
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		return errors.New("seed: async publishes not acknowledged within 5 minutes")
	}
}
