//go:build !failpoints

package host

import "github.com/syncledger/syncledger/ledger"

// failpoints is empty in a normal build: the named points (failpoints.go,
// -tags failpoints) compile to nothing.
type failpoints struct{}

func (failpoints) at(string) {}

func (failpoints) log(l ledger.CommitLog) ledger.CommitLog { return l }
