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
		{"the refusal alone", ledger.ServerState{}, "the server's disk is full (the server refuses every write)", 0},
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
