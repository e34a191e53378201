package main

import (
	"fmt"

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
			"waited", host.RoundWait(w.For), "limit", w.Limit, "last", errText(w.Last))
		return
	}
	fmt.Fprintf(a.stderr, "syncledger: %s\n", a.waitLine(w))
}

// waitLine is a wait as a line: what the command waits for (the server
// with its address), since when, the last failure, and when it gives up.
func (a *app) waitLine(w host.Wait) string { return w.Line(a.waitServer(w)) }

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

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
