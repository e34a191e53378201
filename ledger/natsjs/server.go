package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// A full server (docs/ops.md, "A full disk"): serve closes its store to
// writes when its disk is nearly full, and JetStream then refuses every
// publish at once with "resource limits exceeded for account"; a nats-server
// of its own refuses writes past its store's limits with the other two codes.
// Each is a *ledger.ServerFullError here, never retried.
const (
	codeAccountResources      jetstream.ErrorCode = 10002 // resource limits exceeded for account
	codeInsufficientResources jetstream.ErrorCode = 10023 // insufficient resources
	codeStorageResources      jetstream.ErrorCode = 10047 // insufficient storage resources available
)

// ServerFull returns a *ledger.ServerFullError when err is the server's
// refusal of a write for lack of space, else nil.
func ServerFull(err error) error {
	code, ok := apiCode(err)
	if !ok {
		return nil
	}
	switch code {
	case codeAccountResources, codeInsufficientResources, codeStorageResources:
		return &ledger.ServerFullError{}
	}
	return nil
}

// serverSayWait bounds how long ServerState waits for a full serve's word on
// its disk (it says it twice a second).
const serverSayWait = time.Second

// ServerState asks the server whether it takes writes: one request, the
// account's JetStream info ($JS.API.INFO, which every role may ask), whose
// store limit a full serve has set to 0. When the store is full, it waits (at
// most 1 s) for what serve says of its disk on the ledger's server subject
// (ServerSubject): its data directory, the free space, the reserve. A server
// that is not serve says nothing more than its store's use and limit.
func (l *Log) ServerState(ctx context.Context) (ledger.ServerState, error) {
	return l.d.serverState(ctx)
}

func (l *logDriver) serverState(ctx context.Context) (ledger.ServerState, error) {
	return ServerState(ctx, l.nc, l.name, l.opts.timeout)
}

// ServerState is (*Log).ServerState on nc for ledger ledgerName, each request
// bounded by timeout.
func ServerState(ctx context.Context, nc *nats.Conn, ledgerName string, timeout time.Duration) (ledger.ServerState, error) {
	said := make(chan ledger.ServerState, 1)
	sub, err := nc.Subscribe(ServerSubject(ledgerName), func(m *nats.Msg) {
		var st ledger.ServerState
		if json.Unmarshal(m.Data, &st) == nil && st.Full {
			select {
			case said <- st:
			default:
			}
		}
	})
	if err != nil {
		return ledger.ServerState{}, fmt.Errorf("server state: %w", unreachable(nc, err))
	}
	defer sub.Unsubscribe()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, apiPrefix+"INFO", nil)
	if err != nil {
		return ledger.ServerState{}, fmt.Errorf("server state: %w", unreachable(nc, err))
	}
	var info struct {
		apiResponse
		Store  uint64 `json:"storage"`
		Limits struct {
			MaxStore int64 `json:"max_storage"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return ledger.ServerState{}, fmt.Errorf("server state: undecodable account info: %w", err)
	}
	if info.Error != nil {
		return ledger.ServerState{}, fmt.Errorf("server state: %w", info.Error)
	}
	st := ledger.ServerState{Stored: info.Store}
	if max := info.Limits.MaxStore; max < 0 || info.Store < uint64(max) {
		return st, nil
	}
	st.Full = true
	wctx, cancel := context.WithTimeout(ctx, serverSayWait)
	defer cancel()
	select {
	case s := <-said:
		return s, nil
	case <-wctx.Done():
		if err := ctx.Err(); err != nil {
			return st, err
		}
		return st, nil // a server that is not serve says no more
	}
}

// withServerState returns err with what the server says of its disk when err
// is a refusal for lack of space that does not say it yet (one request, and
// a wait of at most 1 s).
func withServerState(ctx context.Context, nc *nats.Conn, ledgerName string, timeout time.Duration, err error) error {
	var full *ledger.ServerFullError
	if !errors.As(err, &full) || full.State.Full || ctx.Err() != nil {
		return err
	}
	st, serr := ServerState(ctx, nc, ledgerName, timeout)
	if serr != nil {
		return err
	}
	return ledger.WithServerState(err, st)
}

// ServerState asks the server whether it takes writes (see
// (*Log).ServerState): one request, and, when it is full, a wait of at most
// 1 s for what serve says of its disk.
func (l *Ledger) ServerState(ctx context.Context) (ledger.ServerState, error) {
	return ServerState(ctx, l.c.w, l.name, l.c.cfg.Timeout)
}
