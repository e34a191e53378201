package swamp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/memledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/swamp/index"
)

const testTimeout = 50 * time.Second

func testCtx(t testing.TB) context.Context { return testmain.Context(t, testTimeout) }

// env is a ledger on the in-memory log (ledger/memledger) with a file blob
// store: the log is not these tests' subject (TestImportKilledAndRerun, whose
// processes share a ledger, runs a nats-server).
type env struct {
	log interface {
		ledger.CommitLog
		UUID() string
	}
	blobs *ledger.Bucket
	dir   string // the blob store's directory
}

var ledgerN atomic.Int64

// newEnv creates a new ledger.
func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	l, err := memledger.New(ledger.Info{Name: fmt.Sprintf("swamp%d", ledgerN.Add(1)), Blobs: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{log: l, blobs: fileStore(t, dir), dir: dir}
}

// fileStore returns a bucket over a file store on dir, retrying nothing.
func fileStore(t testing.TB, dir string) *ledger.Bucket {
	t.Helper()
	s, err := fileblob.New(fileblob.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.NewBucket(s, ledger.RetryPolicy{Attempts: 1})
}

func fixture(t testing.TB, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyDir copies a fixture into a fresh temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func (e *env) importConfig(src *ledger.Bucket, ns string) ImportConfig {
	return ImportConfig{Source: src, Namespace: ns, SourceName: "test", Log: e.log, Blobs: e.blobs, Host: "importer",
		TempDir: os.TempDir()}
}

// ledgerState is what a ledger holds: its files, and the commits of each
// partition.
type ledgerState struct {
	files   map[string]ledger.Entry
	commits map[string][]string // partition → commit ids, in order
	last    ledger.Seq
}

func readLedger(t testing.TB, e *env) ledgerState {
	t.Helper()
	ctx := testCtx(t)
	st := ledgerState{files: map[string]ledger.Entry{}, commits: map[string][]string{}}
	last, err := e.log.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.last = last
	if last == 0 {
		return st
	}
	err = e.log.Read(ctx, 1, last, func(r ledger.Record) error {
		es, err := eventEntries(ctx, e.blobs, r.Event)
		if err != nil {
			return err
		}
		for _, en := range es {
			if en.Deleted {
				delete(st.files, en.Path)
			} else {
				st.files[en.Path] = en
			}
		}
		st.commits[r.Event.Partition] = append(st.commits[r.Event.Partition], r.Event.Commit)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// golden renders files the way testdata/want/*.txt holds them.
func golden(files map[string]ledger.Entry) string {
	var lines []string
	for p, e := range files {
		lines = append(lines, fmt.Sprintf("%s\t%s\t%d\t%s", ledger.PartitionKey(p), p, e.Size, e.SHA256))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func readWant(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "want", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantOneCommitEach checks that every partition has exactly one commit.
func wantOneCommitEach(t testing.TB, st ledgerState) {
	t.Helper()
	for p, cs := range st.commits {
		if len(cs) != 1 {
			t.Errorf("partition %s has %d commits, want 1", p, len(cs))
		}
	}
}

// pullV2 is a reader implementing swamp's unscoped v2 pull with nothing but the
// index parsers: read _meta.json (v2), assemble every listed shard, download
// every entry, and check each against its size and sha256. It returns rel →
// content.
func pullV2(t testing.TB, objs *ledger.Bucket, layout index.Layout) (map[string][]byte, int64) {
	t.Helper()
	tree, seq, err := tryPullV2(testCtx(t), objs, layout)
	if err != nil {
		t.Fatal(err)
	}
	return tree, seq
}

func tryPullV2(ctx context.Context, objs *ledger.Bucket, layout index.Layout) (map[string][]byte, int64, error) {
	b, err := getAll(ctx, objs, layout.MetaKey())
	if err != nil {
		return nil, 0, err
	}
	meta, err := index.ParseMeta(b)
	if err != nil || meta.Version != index.MetaV2 {
		return nil, 0, fmt.Errorf("meta: %+v, %v", meta, err)
	}
	entries := map[string]index.Entry{}
	for _, p := range meta.Partitions {
		b, err := getAll(ctx, objs, layout.ShardKey(p))
		if err != nil {
			return nil, 0, fmt.Errorf("meta %d lists %s: %w", meta.CommitSeq, p, err)
		}
		sh, err := index.ParseShard(b)
		if err != nil {
			return nil, 0, fmt.Errorf("shard %s: %w", p, err)
		}
		maps.Copy(entries, sh.Entries)
	}
	tree := map[string][]byte{}
	for rel, e := range entries {
		b, err := getAll(ctx, objs, layout.DataKey(rel))
		if err != nil {
			return nil, 0, fmt.Errorf("meta %d: entry %s: %w", meta.CommitSeq, rel, err)
		}
		tree[rel] = b
		if int64(len(b)) != e.Size || (e.SHA256 != "" && hexSHA(b) != e.SHA256) {
			// A commit may have overwritten the object since the shard was read;
			// the caller decides whether that is possible.
			tree[rel] = nil
		}
	}
	return tree, meta.CommitSeq, nil
}

func getAll(ctx context.Context, objs *ledger.Bucket, key string) ([]byte, error) {
	rc, err := objs.GetObject(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func hexSHA(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// treeDigests maps a tree to sha256 per path, for comparisons.
func treeDigests(tree map[string][]byte) map[string]string {
	out := map[string]string{}
	for p, b := range tree {
		if b == nil {
			out[p] = "(changed while read)"
			continue
		}
		out[p] = hexSHA(b)
	}
	return out
}

func entryDigests(files map[string]ledger.Entry) map[string]string {
	out := map[string]string{}
	for p, e := range files {
		out[p] = e.SHA256.String()
	}
	return out
}

// commit publishes one commit of writes (path → content; nil deletes) on the
// ledger as a host would, returning its last seq.
func (e *env) commit(t testing.TB, files map[string][]byte) ledger.Seq {
	t.Helper()
	ctx := testCtx(t)
	var es []ledger.Entry
	for p, b := range files {
		if b == nil {
			es = append(es, ledger.Entry{Path: p, Deleted: true})
			continue
		}
		d, err := ledger.PutBytes(ctx, e.blobs, b)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, ledger.Entry{Path: p, SHA256: d, Size: int64(len(b)), Mode: 0o644})
	}
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	marks := func(p string) projector.Mark {
		h, err := e.log.PartitionHead(ctx, p)
		if err != nil {
			return projector.Mark{}
		}
		return projector.Mark{ModelSeq: h.Event.ModelSeq, Seq: h.Seq}
	}
	evs, err := projector.CommitEvents(e.log.UUID(), marks, ledger.Commit{ID: id, Host: "host-b", At: time.Now(), Entries: es})
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := e.log.Append(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	return seqs[len(seqs)-1]
}

// hashTree returns path → sha256 of every file under dir.
func hashTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = hexSHA(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// failingStore fails the puts whose key fail selects.
type failingStore struct {
	driver.Bucket
	fail func(key string) bool
}

func (f *failingStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.fail(key) {
		return fmt.Errorf("injected failure putting %s", key)
	}
	return f.Bucket.Put(ctx, key, r, size)
}

// NewBatch: the failing puts, each durable when it returns.
func (f *failingStore) NewBatch() driver.Batch { return driver.DurableEach(f) }
