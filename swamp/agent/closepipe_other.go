//go:build !unix

package agent

import "errors"

// openClosePipes: no FIFOs here; the agent publishes when its input ends.
func openClosePipes() (*closePipes, error) { return nil, errors.New("no FIFOs on this system") }
