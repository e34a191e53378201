package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger"
)

// Refuses reports whether the server refuses this Client's user to publish
// to subject: body alone, or as a request (request set) that the server
// would answer if it let it through. It is how status and swamp doctor
// learn what a server's permissions let this user do (natsauth.Probes); the
// caller makes sure what it sends changes nothing if let through. The
// server reports a refusal before it answers the round trip that follows
// the publish, so a publish needs no wait; a request waits for its answer
// at most the Client's Timeout.
func (c *Client) Refuses(ctx context.Context, subject string, body []byte, request bool) (bool, error) {
	inbox := nats.NewInbox()
	var sub *nats.Subscription
	if request {
		var err error
		if sub, err = c.w.SubscribeSync(inbox); err != nil {
			return false, err
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	gctx, done := c.watches.guard(ctx, func(s string) bool { return s == subject })
	defer done()
	var err error
	if request {
		err = c.w.PublishRequest(subject, inbox, body)
	} else {
		err = c.w.Publish(subject, body)
	}
	if err != nil {
		return false, unreachable(c.w, err)
	}
	if err := c.w.FlushWithContext(ctx); err != nil {
		return false, unreachable(c.w, err)
	}
	if pe := lastRefusal(c.w, func(s string) bool { return s == subject }); pe != nil {
		// Its report reaches the guard soon: wait, so that it is not
		// taken for a refusal nobody claimed (Config.Refused).
		select {
		case <-gctx.Done():
		case <-time.After(time.Second):
		}
		return true, nil
	}
	if !request {
		return false, nil
	}
	wctx, cancel := context.WithTimeout(gctx, c.cfg.Timeout)
	defer cancel()
	if _, err := sub.NextMsgWithContext(wctx); err == nil {
		return false, nil
	}
	var pe *ledger.PermissionError
	if errors.As(context.Cause(gctx), &pe) {
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("probe %s: no answer in %v: %w", subject, c.cfg.Timeout, ledger.ErrUnreachable)
}
