package drivertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// countingFeed counts the calls of its driver's methods.
type countingFeed struct {
	ledger.FeedDriver
	n atomic.Int64
}

func (c *countingFeed) Subscribe(ctx context.Context, fc ledger.FeedConsumer) (ledger.Subscription, error) {
	c.n.Add(1)
	return c.FeedDriver.Subscribe(ctx, fc)
}

func (c *countingFeed) Create(ctx context.Context, fc ledger.FeedConsumer) error {
	c.n.Add(1)
	return c.FeedDriver.Create(ctx, fc)
}

func (c *countingFeed) Positions(ctx context.Context) ([]ledger.FeedPosition, error) {
	c.n.Add(1)
	return c.FeedDriver.Positions(ctx)
}

func (c *countingFeed) Delete(ctx context.Context, name string) error {
	c.n.Add(1)
	return c.FeedDriver.Delete(ctx, name)
}

func (c *countingFeed) DeadLetter(ctx context.Context, consumer string, seq ledger.Seq, body []byte) error {
	c.n.Add(1)
	return c.FeedDriver.DeadLetter(ctx, consumer, seq, body)
}

func (c *countingFeed) DeadLetters(ctx context.Context, consumer string, fn func(ledger.StoredDeadLetter) error) error {
	c.n.Add(1)
	return c.FeedDriver.DeadLetters(ctx, consumer, fn)
}

// testFeedRefusedBeforeDriver: what the portable feed checks once — a done
// context, a consumer CheckFeedConsumer refuses, a consumer name that is not
// one — it refuses without calling the driver.
func testFeedRefusedBeforeDriver(t *testing.T, ctx context.Context, f feedEnv) {
	done, cancel := context.WithCancel(ctx)
	cancel()
	good := feedConsumer("c")
	noop := func(ledger.StoredDeadLetter) error { return nil }
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Subscribe", func() error { _, err := f.Feed.Subscribe(done, good); return err }},
		{"Create", func() error { return f.Feed.Create(done, good) }},
		{"Positions", func() error { _, err := f.Feed.Positions(done); return err }},
		{"Delete", func() error { return f.Feed.Delete(done, "c") }},
		{"DeadLetter", func() error { return f.Feed.DeadLetter(done, "c", 1, []byte("x")) }},
		{"DeadLetters", func() error { return f.Feed.DeadLetters(done, "", noop) }},
	} {
		if err := c.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a done context = %v, want context.Canceled", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Subscribe of a bad name", func() error {
			_, err := f.Feed.Subscribe(ctx, ledger.FeedConsumer{Name: "bad.name", AckWait: time.Second})
			return err
		}},
		{"Create without an ack wait", func() error { return f.Feed.Create(ctx, ledger.FeedConsumer{Name: "c"}) }},
		{"Create of an unsorted filter", func() error { return f.Feed.Create(ctx, feedConsumer("c", "b", "a")) }},
		{"Delete of a bad name", func() error { return f.Feed.Delete(ctx, "bad.name") }},
		{"DeadLetter of a bad name", func() error { return f.Feed.DeadLetter(ctx, "bad.name", 1, nil) }},
		{"DeadLetters of a bad name", func() error { return f.Feed.DeadLetters(ctx, "bad name", noop) }},
	} {
		if err := c.call(); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s = %v, want ErrInvalid", c.name, err)
		}
	}
	if n := f.calls.n.Load(); n != 0 {
		t.Errorf("the driver was called %d times for what the portable feed refuses, want none", n)
	}
	if ps, err := f.Feed.Positions(ctx); err != nil || len(ps) != 0 {
		t.Errorf("Positions after the refusals = %v, %v; want none", ps, err)
	}
}
