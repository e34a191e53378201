package consumers_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"time"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/memledger"
)

// A Go program embeds a consumer by implementing Handler (here with
// HandlerFunc) and running it on a durable consumer of the ledger. The handler
// sees each commit once it is whole, in seq order; returning nil acknowledges
// it, an error makes the Runner retry it and eventually dead-letter it.
func ExampleHandler() {
	// An in-memory ledger with two commits; a real program connects to the
	// ledger's NATS server and opens its ports with natsjs.Open: the Client's
	// Ledger(name).Log and Feed.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log, _ := memledger.New(ledger.Info{Name: "demo"}, nil)
	feed := memledger.NewFeed(log, nil)
	commitTo(ctx, log, "audit")
	commitTo(ctx, log, "audit", "telemetry")

	runCtx, stop := context.WithCancel(ctx)
	r, err := consumers.New(consumers.Config{
		Feed: feed,
		Log:  log,
		Name: "printer",
		Handler: consumers.HandlerFunc(func(ctx context.Context, c consumers.Commit) error {
			fmt.Printf("commit at seq %d by %s: %s\n", c.Seq, c.Host, strings.Join(c.Partitions(), ", "))
			if c.Seq == 3 {
				stop() // a real consumer runs until it is told to stop
			}
			return nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Run(runCtx); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("handled %d commits\n", r.Stats().Handled)
	// Output:
	// commit at seq 1 by example-host: audit
	// commit at seq 3 by example-host: audit, telemetry
	// handled 2 commits
}

// commitTo appends a commit writing one file in each of the partitions (a
// projector host does this with content in a blob store).
func commitTo(ctx context.Context, log *memledger.Log, partitions ...string) {
	id, _ := ledger.NewCommitID(rand.Reader)
	var evs []ledger.Event
	for i, p := range partitions {
		prev, _ := log.PartitionLastSeq(ctx, p)
		var modelSeq uint64 = 1
		if prev > 0 {
			head, _ := log.PartitionHead(ctx, p)
			modelSeq = head.Event.ModelSeq + 1
		}
		path := fmt.Sprintf("%s/%s.json", p, id)
		evs = append(evs, ledger.Event{
			V: ledger.FormatVersion, Ledger: log.UUID(), Commit: id, Host: "example-host",
			At: time.Now(), Partition: p, ModelSeq: modelSeq, Prev: prev,
			Parts: len(partitions), Part: i + 1,
			Entries: []ledger.Entry{{Path: path, SHA256: ledger.DigestOf([]byte(path)), Size: 2, Mode: 0o644}},
		})
	}
	if _, err := log.Append(ctx, evs); err != nil {
		fmt.Println(err)
	}
}
