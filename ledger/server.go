package ledger

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrServerFull: the server refused a write because its disk is full (serve
// keeps a reserve of free space on its data directory and refuses every
// write below it), or because its store reached a limit its operator set.
// Nothing of the refused write was stored; the same write succeeds once space
// is freed on the server, without restarting it. Errors wrapping it are
// *ServerFullError.
var ErrServerFull = errors.New("the server's disk is full")

// ServerState is what a server says of its store: whether it takes writes,
// and, from serve, its data directory and the free space there. A server that
// is not serve (a nats-server of its own) says only whether its store is full
// and what it holds.
type ServerState struct {
	// Full: the server refuses writes for lack of space.
	Full bool `json:"full"`
	// Dir is the server's data directory; "" when the server does not say.
	Dir string `json:"dir,omitempty"`
	// Free and Size are the bytes free (to the server) and in all on Dir's
	// filesystem; 0 when unknown.
	Free uint64 `json:"free,omitempty"`
	Size uint64 `json:"size,omitempty"`
	// Reserve is the free space below which the server refuses writes, Resume
	// the free space at which it takes them again (above Reserve, so that it
	// does not flap); 0 when unknown.
	Reserve uint64 `json:"reserve,omitempty"`
	Resume  uint64 `json:"resume,omitempty"`
	// Stored is the bytes the server's store holds.
	Stored uint64 `json:"stored"`
	// Since is when the server last became full, or took writes again.
	Since time.Time `json:"since,omitzero"`
	// Cause says why the server is full, in words: the free space below the
	// reserve, a write that failed for lack of space, a limit of the store.
	Cause string `json:"cause,omitempty"`
}

// Need is how many bytes must be freed on the server's disk before it takes
// writes again (0 when it takes them, or when unknown).
func (s ServerState) Need() uint64 {
	if !s.Full || s.Resume <= s.Free {
		return 0
	}
	return s.Resume - s.Free
}

// String describes a full server's disk in words ("" when it is not full).
func (s ServerState) String() string {
	if !s.Full {
		return ""
	}
	var b strings.Builder
	if s.Dir != "" {
		fmt.Fprintf(&b, "%s has %s free", s.Dir, Bytes(s.Free))
		if s.Size > 0 {
			fmt.Fprintf(&b, " of %s", Bytes(s.Size))
		}
		if s.Reserve > 0 {
			fmt.Fprintf(&b, "; the server refuses writes below %s free and takes them again at %s", Bytes(s.Reserve), Bytes(s.Resume))
		}
	} else {
		fmt.Fprintf(&b, "the server's store holds %s and takes no more", Bytes(s.Stored))
	}
	if s.Cause != "" {
		fmt.Fprintf(&b, "; %s", s.Cause)
	}
	return b.String()
}

// ServerFullError is a write the server refused for lack of space, with what
// the server says of its disk when that is known (State.Full is false when
// not: the refusal alone). errors.Is(err, ErrServerFull) holds.
type ServerFullError struct {
	State ServerState
	// Err, when set, is the refused write's error (itself wrapping a
	// ServerFullError without State), to which this one adds what the server
	// said afterwards (WithServerState).
	Err error
}

func (e *ServerFullError) Error() string {
	d := e.State.String()
	switch {
	case e.Err != nil && d != "":
		return fmt.Sprintf("%v (%s)", e.Err, d)
	case e.Err != nil:
		return e.Err.Error()
	case d != "":
		return fmt.Sprintf("%v (%s)", ErrServerFull, d)
	}
	return ErrServerFull.Error()
}

func (e *ServerFullError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrServerFull
}

// WithServerState returns err, a write the server refused for lack of space,
// with st, what the server said of its disk since; err as it is when it says
// that already, when st is not full, or when err is no such refusal.
func WithServerState(err error, st ServerState) error {
	var full *ServerFullError
	if !st.Full || !errors.As(err, &full) || full.State.Full {
		return err
	}
	if err == full {
		return &ServerFullError{State: st}
	}
	return &ServerFullError{State: st, Err: err}
}

// Bytes is n in binary units for people: "512 B", "12.0 MiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
