package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

// serverStateWait bounds the question a failed command asks the server about
// its disk (one request, and serve's word: at most 1 s of it).
const serverStateWait = 3 * time.Second

// withServerState returns err with what the server says of its disk when err
// is a write the server refused for lack of space and does not say it yet (a
// blob put's, a key-value write's: they do not know the ledger whose server
// subject serve speaks on). It asks on the connection the command opened,
// never a new one, and not after the command was interrupted.
func (a *app) withServerState(ctx context.Context, err error) error {
	var full *ledger.ServerFullError
	if !errors.As(err, &full) || full.State.Full || ctx.Err() != nil {
		return err
	}
	a.res.connMu.Lock()
	c := a.res.nats
	a.res.connMu.Unlock()
	if c == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, serverStateWait)
	defer cancel()
	st, serr := c.Ledger(a.ledgerName).ServerState(ctx)
	if serr != nil {
		return err
	}
	return ledger.WithServerState(err, st)
}

// serverFullNote is what to do about a write the server refused for lack of
// space: free space there, then run the command again, which the server takes
// by itself once it has room (docs/ops.md, "A full disk").
func serverFullNote(st ledger.ServerState) string {
	const again = "then run this again: the server takes writes by itself once it has room, nothing to restart"
	switch {
	case st.Dir != "" && st.Need() > 0:
		return fmt.Sprintf("free %s on the disk of serve's data directory %s, %s", ledger.Bytes(st.Need()), st.Dir, again)
	case st.Dir != "":
		return fmt.Sprintf("free space on the disk of serve's data directory %s, %s", st.Dir, again)
	}
	return "free space on the disk of serve's data directory (its --data), or raise the store limit of a nats-server of your own, " + again
}

// serverState asks the ledger's server whether it takes writes (one request;
// when it is full, up to 1 s more for what serve says of its disk), for the
// commands that show it: nil when it cannot say (a failure is logged, the
// command goes on).
func (a *app) serverState(ctx context.Context) *ledger.ServerState {
	lg, err := a.ledgerOn(ctx, a.ledgerName)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, serverStateWait)
		defer cancel()
		var st ledger.ServerState
		if st, err = lg.ServerState(ctx); err == nil {
			return &st
		}
	}
	a.logger.Warn("the server did not say whether it takes writes", "err", err)
	return nil
}

// cacheFullNote is what to do about a pull that stopped on a full cache disk:
// free space there, then sync again (what it applied is kept).
func cacheFullNote(ns *host.NoSpaceError) string {
	const again = "then sync again: what was applied is kept"
	switch {
	case ns.Files == 0:
		return fmt.Sprintf("free space on the disk of the cache %s, %s", ns.Dir, again)
	case ns.Short() == 0:
		return fmt.Sprintf("free space on the disk of the cache %s (the rest of the pull is %s; %s is free), %s",
			ns.Dir, ledger.Bytes(uint64(ns.Need)), ledger.Bytes(ns.Free), again)
	}
	return fmt.Sprintf("free up to %s on the disk of the cache %s (the rest of the pull is %s; %s is free), %s",
		ledger.Bytes(ns.Short()), ns.Dir, ledger.Bytes(uint64(ns.Need)), ledger.Bytes(ns.Free), again)
}
