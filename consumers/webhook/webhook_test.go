package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/consumers/webhook"
	"github.com/syncledger/syncledger/ledger"
)

var secret = []byte("s3cret")

// receiver is a webhook endpoint that checks every request and answers as
// answer says for the n-th request of a commit. An answer with hang set is
// held until the client has given up on the request (its connection closed),
// then given: the client timed out before the receiver answered, by
// construction rather than by a sleep longer than the client's timeout.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	calls  map[string]int // commit id → requests
	ok     []ledger.Seq   // seqs answered 2xx, in order
	answer func(s consumers.Summary, n int) (code int, hang bool)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !webhook.Verify(secret, body, r.Header.Get(webhook.HeaderSignature)) {
		rc.t.Errorf("bad signature %q", r.Header.Get(webhook.HeaderSignature))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var s consumers.Summary
	if err := json.Unmarshal(body, &s); err != nil {
		rc.t.Errorf("bad body: %v", err)
	}
	if got := r.Header.Get(webhook.HeaderIdempotency); got != s.Commit || got == "" {
		rc.t.Errorf("Idempotency-Key %q, commit %q", got, s.Commit)
	}
	if got := r.Header.Get(webhook.HeaderSeq); got != strconv.FormatUint(uint64(s.Seq), 10) {
		rc.t.Errorf("seq header %q, body seq %d", got, s.Seq)
	}
	rc.mu.Lock()
	rc.calls[s.Commit]++
	n := rc.calls[s.Commit]
	rc.mu.Unlock()
	code, hang := http.StatusNoContent, false
	if rc.answer != nil {
		code, hang = rc.answer(s, n)
	}
	if hang {
		// The body has been read, so the server watches the connection and
		// cancels the request's context when the client closes it.
		select {
		case <-r.Context().Done():
		case <-time.After(consumertest.Timeout):
			rc.t.Errorf("commit %d: the client never gave up on a hung request", s.Seq)
		}
	}
	if code < 300 {
		rc.mu.Lock()
		rc.ok = append(rc.ok, s.Seq)
		rc.mu.Unlock()
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte("answer"))
}

func (rc *receiver) okSeqs() []ledger.Seq {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]ledger.Seq(nil), rc.ok...)
}

func start(t *testing.T, l *consumertest.Ledger, url string) (*consumers.Runner, func()) {
	t.Helper()
	h, err := webhook.New(webhook.Config{URL: url, Secret: secret, Ledger: l.Name, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := consumers.New(consumers.Config{
		Feed: l.Feed, Log: l.Log, Name: "webhook", Handler: h,
		MaxDeliver: 4, BackOff: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(consumertest.Ctx(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

func last(s []ledger.Seq) ledger.Seq { return s[len(s)-1] }

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "t")
	c1 := l.Commit(t, "a")
	c2 := l.Commit(t, "a", "b") // 500, 500, then accepted
	c3 := l.Commit(t, "b")      // 400: dead letter
	c4 := l.Commit(t, "a")      // a timeout, then accepted
	rc := &receiver{t: t, calls: map[string]int{}, answer: func(s consumers.Summary, n int) (int, bool) {
		switch {
		case s.Seq == last(c2) && n <= 2:
			return http.StatusInternalServerError, false
		case s.Seq == last(c3):
			return http.StatusBadRequest, false
		case s.Seq == last(c4) && n == 1:
			return http.StatusOK, true // answered after the client's timeout
		}
		return http.StatusOK, false
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	r, stop := start(t, l, srv.URL+"/hook")
	consumertest.Wait(t, 20*time.Second, "all commits", func() bool { return r.Stats().Seq >= last(c4) })
	stop()
	consumertest.Wait(t, 5*time.Second, "the timed-out request's answer", func() bool { return len(rc.okSeqs()) == 4 })
	// The timed-out request was answered 200 by the receiver after the client gave
	// up: the receiver saw c4 twice, and dedupes it by its Idempotency-Key.
	if diff := cmp.Diff([]ledger.Seq{last(c1), last(c2), last(c4), last(c4)}, rc.okSeqs()); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	if st := r.Stats(); st.Handled != 3 || st.DeadLetters != 1 || st.Retries != 3 {
		t.Errorf("stats = %+v, want 3 handled, 1 dead letter, 3 retries", st)
	}
	var dead []consumers.DeadLetter
	err := consumers.ReadDeadLetters(consumertest.Ctx(t), l.Feed, "webhook", func(d consumers.DeadLetter) error {
		dead = append(dead, d)
		return nil
	})
	if err != nil || len(dead) != 1 || dead[0].Seq != last(c3) || dead[0].Attempts != 1 {
		t.Fatalf("dead letters = %+v, %v; want c3 after one attempt", dead, err)
	}

	// A restart does not post acknowledged commits again.
	before := len(rc.okSeqs())
	r2, _ := start(t, l, srv.URL+"/hook")
	c5 := l.Commit(t, "b")
	consumertest.Wait(t, 20*time.Second, "c5", func() bool { return r2.Stats().Seq >= last(c5) })
	if got := rc.okSeqs()[before:]; !cmp.Equal(got, []ledger.Seq{last(c5)}) {
		t.Errorf("after restart accepted %v, want only %d", got, last(c5))
	}
}

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"seq":1}`)
	sig := webhook.Sign(secret, body)
	// echo -n '{"seq":1}' | openssl dgst -sha256 -hmac s3cret
	if sig != "sha256=63c42aa7cb12b8b8f8ddd18d325c916eaa51e352fac52fc5899c227a8db0cb11" {
		t.Errorf("Sign = %q", sig)
	}
	if !webhook.Verify(secret, body, sig) || webhook.Verify(secret, []byte(`{"seq":2}`), sig) || webhook.Verify([]byte("x"), body, sig) {
		t.Error("Verify accepts a wrong body or secret, or refuses the right one")
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []webhook.Config{
		{URL: "ftp://x/y", Secret: secret},
		{URL: "http://", Secret: secret},
		{URL: "http://x/y"},
	} {
		if _, err := webhook.New(cfg); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", cfg, err)
		}
	}
}
