package host

import (
	"time"
)

// Policy is a push's one retry policy (Config.Policy): which failures a
// Commit retries and how often. The zero value is the default.
type Policy struct {
	// Conflicts is the most times one commit of a push is published: after
	// each chain conflict (another host extended a partition it touches) the
	// push reads the partitions' new commits, and, when none changed a path
	// it changes, plans its group again and publishes after a backoff of n ×
	// 1–7 ms (n the conflicts so far; the jitter keeps two hosts fighting over
	// one partition from retrying in lockstep). 0 means 20.
	Conflicts int
	// Settles is the most conflicts a push settles (CommitOptions.Settle:
	// swamp's renumbering), each followed by a scan of its whole scope. 0
	// means 3.
	Settles int
}

func (p Policy) settles() int {
	if p.Settles <= 0 {
		return 3
	}
	return p.Settles
}

func (p Policy) conflicts() int {
	if p.Conflicts <= 0 {
		return 20
	}
	return p.Conflicts
}

// backoff is the pause after the n-th conflict: n × 1–7 ms, the factor taken
// from the clock's nanoseconds.
func (p Policy) backoff(n int, now time.Time) time.Duration {
	return time.Duration(n*(1+int(now.UnixNano()%7))) * time.Millisecond
}
