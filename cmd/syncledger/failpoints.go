//go:build failpoints

package main

import (
	"os"
	"slices"

	"github.com/syncledger/syncledger/projector/host"
)

// failpointsEnabled reports whether this binary was built with -tags
// failpoints, the only build that honours FailpointEnv.
const failpointsEnabled = true

// FailpointEnv names the environment variable that makes the binary kill itself
// (SIGKILL, as kill -9 would) at a named point of sync or commit; crash tests use
// it. Only a binary built with -tags failpoints reads it. Points: host.Failpoints.
const FailpointEnv = "SYNCLEDGER_FAILPOINT"

// setFailpoint arms h's failpoint from FailpointEnv.
func (a *app) setFailpoint(h *host.Host) error {
	fp := a.getenv(FailpointEnv)
	if fp == "" {
		return nil
	}
	if !slices.Contains(host.Failpoints, fp) {
		return usagef("%s=%q: unknown failpoint; known: %v", FailpointEnv, fp, host.Failpoints)
	}
	h.SetFailpoint(func(name string) {
		if name == fp {
			a.logger.Warn("failpoint reached: killing this process", "failpoint", name)
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Kill() // SIGKILL on Unix
			}
			select {} // the signal is on its way
		}
	})
	return nil
}
