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

// TestDeadLetterPreempted: another consumer's user publishes first, on its
// own dead-letter subject, under the message id a dead letter of audit
// will carry (audit/<seq>); audit's dead letter is stored all the same, on
// its subject, and the same dead letter sent again is stored once.
func TestDeadLetterPreempted(t *testing.T) {
	t.Parallel()
	_, nc := natsjstest.RunServer(t)
	ctx := testCtx(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateLog(ctx, nc, LedgerConfig{Name: "dlp"}); err != nil {
		t.Fatal(err)
	}
	f, err := NewFeed(nc, "dlp")
	if err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= 3; seq++ {
		if _, err := js.Publish(ctx, DeadLetterSubject("dlp", "hook"), []byte("squat"), jetstream.WithMsgID(fmt.Sprintf("audit/%d", seq))); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := f.DeadLetter(ctx, "audit", 2, []byte("audit 2")); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.DeadLetter(ctx, "audit", 4, []byte("audit 4")); err != nil {
		t.Fatal(err)
	}
	if err := f.DeadLetter(ctx, "audit", 4, []byte("audit 4")); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := f.DeadLetters(ctx, "audit", func(d ledger.StoredDeadLetter) error {
		got = append(got, string(d.Body))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The pre-empted seq 2, sent twice, may be stored twice (each send finds
	// its base id taken and takes a fresh one); seq 4 once.
	if len(got) < 2 || got[0] != "audit 2" || got[len(got)-1] != "audit 4" || slices.Index(got, "audit 4") != len(got)-1 {
		t.Fatalf("audit's dead letters = %q", got)
	}
}
