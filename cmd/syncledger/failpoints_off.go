//go:build !failpoints

package main

import "github.com/syncledger/syncledger/projector/host"

// failpointsEnabled reports whether this binary was built with -tags
// failpoints. A normal build has no failpoints: SYNCLEDGER_FAILPOINT is ignored.
const failpointsEnabled = false

// setFailpoint does nothing in a normal build.
func (a *app) setFailpoint(*host.Host) error { return nil }
