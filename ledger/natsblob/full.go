package natsblob

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// full returns err, or a *ledger.ServerFullError when err is the server's
// refusal of a write for lack of space: the codes natsjs.ServerFull reads (a
// full serve's closed store, a nats-server's store limits). The error names
// no more: the caller, which knows the ledger, asks the server
// (natsjs.ServerState).
func full(err error) error {
	var ae *jetstream.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.ErrorCode {
	case 10002, 10023, 10047:
		return &ledger.ServerFullError{}
	}
	return err
}
