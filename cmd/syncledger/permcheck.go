package main

import (
	"context"
	"time"

	"github.com/syncledger/syncledger/natsauth"
)

// permissionProblem probes what the server lets this user do
// (natsauth.Probes: a version marker, then, if it is refused, harmless
// requests) and says what is wrong with its permissions: older than this
// build's, and what they let it do that no role below the admin may now.
// "" when nothing is (this build's permissions, an admin), or
// when the probes could not run (an unreachable server is another
// command's error). status and swamp doctor print it.
func (a *app) permissionProblem(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := a.NATS(ctx)
	if err != nil {
		return ""
	}
	scope := natsauth.Scope{Ledger: a.ledgerName}
	marker, must := natsauth.Probes(scope)
	refused := map[string]bool{}
	for _, p := range append([]natsauth.Probe{marker}, must...) {
		r, err := c.Refuses(ctx, p.Subject, p.Body, p.Request)
		if err != nil {
			a.logger.Debug("could not probe the server's permissions", "subject", p.Subject, "err", err)
			return ""
		}
		refused[p.Subject] = r
		if p.Subject == marker.Subject && !r {
			break // this build's permissions, or the admin's
		}
	}
	return natsauth.Assess(scope, refused).Problem(a.ledgerName)
}
