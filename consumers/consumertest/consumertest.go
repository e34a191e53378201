// Package consumertest gives the consumers' tests an in-memory ledger (log,
// feed and heartbeat bucket from ledger/memledger) and a writer that appends
// commits to a log without reading the chain heads back (it is its only
// writer). Tests that need a real server build the ledger on the adapter and
// hand it to On.
package consumertest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// Timeout bounds a test's context.
const Timeout = 60 * time.Second

// Ctx returns a context cancelled when the test ends or after Timeout.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Ledger is a ledger named Name: its log, its feed and its heartbeat bucket.
type Ledger struct {
	Log  ledger.CommitLog
	Feed ledger.Feed
	KV   ledger.KV // the heartbeats' bucket
	Name string
	UUID string
	Host string // host id of the commits

	// Mem is the in-memory feed of a ledger New made (nil from On), for its
	// knobs (Disconnect).
	Mem *memledger.Feed

	mu    sync.Mutex
	heads map[string]ledger.Record // partition → its last event (Seq, ModelSeq)
}

// New returns an empty in-memory ledger named name.
func New(t testing.TB, name string) *Ledger {
	t.Helper()
	log, err := memledger.New(ledger.Info{Name: name, Blobs: "file://" + t.TempDir()}, nil)
	if err != nil {
		t.Fatalf("create ledger: %v", err)
	}
	feed := memledger.NewFeed(log, nil)
	l := On(log, feed, memledger.NewKV(nil), name, log.UUID())
	l.Mem = feed
	return l
}

// On returns the writer of an empty ledger opened elsewhere (a real server's).
func On(log ledger.CommitLog, feed ledger.Feed, kv ledger.KV, name, uuid string) *Ledger {
	return &Ledger{Log: log, Feed: feed, KV: kv, Name: name, UUID: uuid, Host: "host-a", heads: map[string]ledger.Record{}}
}

// PathIn returns the i-th datastore path of a partition: "a--b--c--d" keys are
// data-style paths ("a/b/c/d/file-i"), other keys are single-directory paths.
func PathIn(partition string, i int) string {
	if strings.Contains(partition, "--") {
		return strings.ReplaceAll(partition, "--", "/") + fmt.Sprintf("/file-%d", i)
	}
	return fmt.Sprintf("%s/file-%d", partition, i)
}

// Events builds the events of a commit extending each partition's chain, one
// file of size bytes each, without appending them.
func (l *Ledger) Events(t testing.TB, size int64, partitions ...string) []ledger.Event {
	t.Helper()
	id, err := ledger.NewCommitID(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := make([]ledger.Event, len(partitions))
	for i, p := range partitions {
		h := l.heads[p]
		path := PathIn(p, int(h.Event.ModelSeq)+1)
		if k := ledger.PartitionKey(path); k != p {
			t.Fatalf("consumertest: partition %q: path %q is in partition %q", p, path, k)
		}
		evs[i] = ledger.Event{
			V: ledger.FormatVersion, Ledger: l.UUID, Commit: id, Host: l.Host, At: at,
			Message: "commit " + strings.Join(partitions, ","), Partition: p,
			ModelSeq: h.Event.ModelSeq + 1, Prev: h.Seq, Parts: len(partitions), Part: i + 1,
			Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: size, Mode: 0o644}},
		}
	}
	return evs
}

// Append appends events built by Events and records the new chain heads.
func (l *Ledger) Append(t testing.TB, evs []ledger.Event) []ledger.Seq {
	t.Helper()
	seqs, err := l.Log.Append(Ctx(t), evs)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range evs {
		l.heads[e.Partition] = ledger.Record{Seq: seqs[i], Event: e}
	}
	return seqs
}

// Commit appends a commit touching partitions (one 10-byte file each) and
// returns its seqs; the commit's seq is the last.
func (l *Ledger) Commit(t testing.TB, partitions ...string) []ledger.Seq {
	t.Helper()
	return l.Append(t, l.Events(t, 10, partitions...))
}

// Wait polls cond every 10 ms until it holds, failing the test after d.
func Wait(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
