package ledger

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/syncledger/syncledger/ledger/driver"
)

func TestPutReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		size    int64
		wantErr error
	}{
		{"exact", "hello", 5, nil},
		{"unknown", "hello", -1, nil},
		{"empty", "", 0, nil},
		{"short", "hell", 5, ErrInvalid},
		{"long", "hello!", 5, ErrInvalid},
	} {
		pr := newPutReader(context.Background(), strings.NewReader(tc.content), tc.size)
		b, err := io.ReadAll(pr)
		if tc.wantErr == nil {
			if err != nil || string(b) != tc.content || pr.done() != nil || pr.n != int64(len(tc.content)) {
				t.Errorf("%s: read %q, %v, Done %v, N %d", tc.name, b, err, pr.done(), pr.n)
			}
			continue
		}
		if !errors.Is(err, tc.wantErr) || !errors.Is(pr.done(), tc.wantErr) || !errors.Is(pr.err, tc.wantErr) {
			t.Errorf("%s: read error %v, Done %v, want %v", tc.name, err, pr.done(), tc.wantErr)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	pr := newPutReader(ctx, strings.NewReader("data"), -1)
	cancel()
	if _, err := io.ReadAll(pr); !errors.Is(err, context.Canceled) || !errors.Is(pr.done(), context.Canceled) {
		t.Errorf("read after cancel = %v, want context.Canceled", err)
	}

	pr = newPutReader(context.Background(), strings.NewReader("data"), -1)
	if _, err := pr.Read(make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	if err := pr.done(); err == nil {
		t.Errorf("Done before EOF = nil, want an error")
	}
}

// TestFailWrapsContext: a failed operation's error wraps the context's error
// when the context ended, so a failure an SDK reports in its own words still
// tests as errors.Is(err, context.Canceled); and the sentinel its code means.
func TestFailWrapsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sdkErr := errors.New("operation error: canceled")
	if err := fail(ctx, opStat, "k", driver.Unknown, sdkErr, ""); !errors.Is(err, sdkErr) || errors.Is(err, context.Canceled) {
		t.Errorf("fail(live ctx) = %v, want it to wrap the error only", err)
	}
	cancel()
	err := fail(ctx, opStat, "k", driver.Unknown, sdkErr, "")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, sdkErr) {
		t.Errorf("fail(cancelled ctx) = %v, want it to wrap both", err)
	}
	if err := fail(context.Background(), opStat, "k", driver.NotFound, sdkErr, ""); !errors.Is(err, ErrNotFound) || !errors.Is(err, sdkErr) {
		t.Errorf("fail(NotFound) = %v, want it to wrap ErrNotFound and the error", err)
	}
}
