package natsjs

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestDeadLettersHoldNoState: the dead letters are listed in the order
// stored, per consumer and all, without a consumer on the dead-letter
// stream — by direct gets, and by leader gets on a dead-letter stream made
// before it allowed direct gets (the previous release's).
func TestDeadLettersHoldNoState(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, direct := range []bool{true, false} {
		name := fmt.Sprintf("dl%v", direct)
		if _, err := CreateLog(ctx, nc, LedgerConfig{Name: name}); err != nil {
			t.Fatal(err)
		}
		if !direct {
			// The ledger's dead letters, as the previous release made them.
			if err := js.DeleteStream(ctx, DeadLetterStream(name)); err != nil {
				t.Fatal(err)
			}
			cfg := deadLetterConfig(name, 1)
			cfg.AllowDirect = false
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}
		f, err := NewFeed(nc, name)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range []string{"audit", "hook", "audit"} {
			if err := f.DeadLetter(ctx, c, ledger.Seq(i+1), []byte(fmt.Sprintf("%s %d", c, i+1))); err != nil {
				t.Fatal(err)
			}
		}
		creates := spyConsumerCreates(t, srv.ClientURL())
		list := func(consumer string) []string {
			t.Helper()
			var got []string
			err := f.DeadLetters(ctx, consumer, func(d ledger.StoredDeadLetter) error {
				if d.Received.IsZero() || d.Stored == 0 {
					return fmt.Errorf("dead letter %+v: no time or seq", d)
				}
				got = append(got, d.Consumer+": "+string(d.Body))
				return nil
			})
			if err != nil {
				t.Fatalf("DeadLetters(%q): %v", consumer, err)
			}
			return got
		}
		if got, want := list("audit"), []string{"audit: audit 1", "audit: audit 3"}; !slices.Equal(got, want) {
			t.Errorf("direct %v: DeadLetters(audit) = %q, want %q", direct, got, want)
		}
		if got, want := list(""), []string{"audit: audit 1", "hook: hook 2", "audit: audit 3"}; !slices.Equal(got, want) {
			t.Errorf("direct %v: DeadLetters() = %q, want %q", direct, got, want)
		}
		if n := creates(); n != 0 {
			t.Errorf("direct %v: listing the dead letters sent %d consumer creates, want 0", direct, n)
		}
	}
}
