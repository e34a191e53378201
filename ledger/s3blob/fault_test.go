package s3blob

import (
	"net/http"
	"testing"
	"time"

	"github.com/syncledger/syncledger/internal/faulty"
	"github.com/syncledger/syncledger/ledger"
)

// TestHTTPFaults runs the shared fault workload (faulty.Exercise) against the
// in-process S3 server with faults injected at the HTTP level: 503 answers,
// hanging requests, connections reset while sending or receiving, response
// bodies cut short (with and without their length), slow answers, and answers
// lost after the server stored or deleted, alone and under ours
// (a ledger.Bucket's retry policy; the SDK's own retryer is off). Puts succeed after bounded retries or fail
// naming the blob; no get ever yields bytes other than the blob's; every blob
// a put acknowledged reads back.
func TestHTTPFaults(t *testing.T) {
	// The SDK refuses a plain *http.Client when a CA bundle is configured.
	t.Setenv("AWS_CA_BUNDLE", "")
	base := startFake(t)
	clean, err := New(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		seed  uint64
		retry *ledger.RetryPolicy
		floor float64
	}{
		{"no retries", 1, nil, 0},
		{"with retrying store", 2, &ledger.RetryPolicy{Attempts: 5, Wait: time.Millisecond, MaxWait: 10 * time.Millisecond, AttemptTimeout: 3 * time.Second}, 0.97},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := faulty.NewTransport(http.DefaultTransport, faulty.Config{Seed: tc.seed, Rate: 0.25, Delay: time.Millisecond, Hang: 50 * time.Millisecond})
			cfg := base
			cfg.HTTPClient = &http.Client{Transport: tr, Timeout: 2 * time.Second}
			s, err := New(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := faulty.Exercise(t, t.Context(), s, clean, faulty.Workload{Seed: tc.seed, Blobs: 30, Retry: tc.retry, MinPutSuccess: tc.floor})
			t.Logf("%v; faults injected: %v", res, tr.Counts())
			if tr.Total() == 0 {
				t.Fatal("no fault injected")
			}
		})
	}
}
