package main

import (
	"fmt"
	"time"

	"github.com/syncledger/syncledger/projector/host"
)

// waiting says on stderr what a command that reaches the ledger waits for
// (host.Config.Waiting): after host.DefaultReport with no answer from the
// NATS server or the blob store, then again every few seconds, until it
// gets one or gives up (--wait). A swamp agent's waits go to the extension
// instead (swamp_agent.go), which swamp shows.
func (a *app) waiting(w host.Wait) {
	if a.logFormat == "json" {
		a.logger.Warn("waiting", "op", w.Op, "server", a.waitServer(w), "for", w.What,
			"waited", roundDuration(w.For), "limit", w.Limit, "last", errText(w.Last))
		return
	}
	fmt.Fprintf(a.stderr, "syncledger: %s\n", a.waitLine(w))
}

// waitLine is a wait as a line: what the command waits for, since when,
// the last failure, and when it gives up, leaving what.
func (a *app) waitLine(w host.Wait) string {
	s := fmt.Sprintf("%s: waiting for %s %s: no answer for %v", w.Op, a.waitServer(w), w.What, roundDuration(w.For))
	if w.Last != nil {
		s += fmt.Sprintf(" (last: %v)", w.Last)
	}
	return s + fmt.Sprintf("; giving up after %v", w.Limit)
}

// waitServer names what a wait is on, with its address.
func (a *app) waitServer(w host.Wait) string {
	if w.On == "blobs" {
		a.res.blobsMu.Lock()
		url := a.res.blobsURL
		a.res.blobsMu.Unlock()
		if url == "" {
			return w.Server()
		}
		return w.Server() + " (" + url + ")"
	}
	return w.Server() + " (" + redactURL(a.natsURL) + ")"
}

func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
