package ledger_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/syncledger/syncledger/ledger"
)

func TestServerFullError(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tc := range []struct {
		name string
		st   ledger.ServerState
		want string
		need uint64
	}{
		{"the refusal alone", ledger.ServerState{}, "the server's disk is full", 0},
		{"serve's word", ledger.ServerState{Full: true, Dir: "/var/lib/syncledger", Free: 12 * mib, Size: 1 << 30, Reserve: 64 * mib, Resume: 96 * mib, Cause: "free space below the reserve"},
			"the server's disk is full (/var/lib/syncledger has 12.0 MiB free of 1.0 GiB; the server refuses writes below 64.0 MiB free and takes them again at 96.0 MiB; free space below the reserve)", 84 * mib},
		{"a nats-server's store limit", ledger.ServerState{Full: true, Stored: 3 * mib},
			"the server's disk is full (the server's store holds 3.0 MiB and takes no more)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fmt.Errorf("put blob x: %w", &ledger.ServerFullError{State: tc.st})
			if !errors.Is(err, ledger.ErrServerFull) {
				t.Fatalf("%v is not ErrServerFull", err)
			}
			if got := (&ledger.ServerFullError{State: tc.st}).Error(); got != tc.want {
				t.Errorf("Error() = %q\nwant      %q", got, tc.want)
			}
			if got := tc.st.Need(); got != tc.need {
				t.Errorf("Need() = %d, want %d", got, tc.need)
			}
		})
	}
}

func TestWithServerState(t *testing.T) {
	t.Parallel()
	st := ledger.ServerState{Full: true, Dir: "/d", Free: 1, Reserve: 2, Resume: 3}
	refused := fmt.Errorf("put blob b: %w", &ledger.ServerFullError{})
	err := ledger.WithServerState(refused, st)
	if want := "put blob b: the server's disk is full (/d has 1 B free; the server refuses writes below 2 B free and takes them again at 3 B)"; err.Error() != want {
		t.Errorf("Error() = %q\nwant      %q", err, want)
	}
	var full *ledger.ServerFullError
	if !errors.As(err, &full) || full.State != st || !errors.Is(err, ledger.ErrServerFull) {
		t.Errorf("%v: ServerFullError %+v", err, full)
	}
	if again := ledger.WithServerState(err, ledger.ServerState{Full: true, Dir: "/other"}); again != err {
		t.Errorf("a second state replaced the first: %v", again)
	}
	if bare := ledger.WithServerState(&ledger.ServerFullError{}, st); bare.Error() != "the server's disk is full (/d has 1 B free; the server refuses writes below 2 B free and takes them again at 3 B)" {
		t.Errorf("bare: %v", bare)
	}
	other := errors.New("boom")
	if got := ledger.WithServerState(other, st); got != other {
		t.Errorf("another error changed: %v", got)
	}
	if got := ledger.WithServerState(refused, ledger.ServerState{}); got != refused {
		t.Errorf("a state that is not full changed the error: %v", got)
	}
}
