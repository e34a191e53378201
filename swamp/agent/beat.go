package agent

import (
	"context"
	"sync"

	"github.com/syncledger/syncledger/ledger"
)

// beats sends this host's position (Ports.Beat, the heartbeat `sync` and
// `watch` send) after each pull and each publish, in the background: one
// at a time, the latest position only, so that swamp never waits for it.
type beats struct {
	mu      sync.Mutex
	next    *[2]ledger.Seq // hwm, head; nil: none to send
	running bool
	idle    *sync.Cond
}

// beat records (hwm, head) as the position to send.
func (a *Agent) beat(ctx context.Context, hwm, head ledger.Seq) {
	b := &a.beats
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next = &[2]ledger.Seq{hwm, max(head, hwm)}
	if b.running {
		return
	}
	b.running = true
	ctx = context.WithoutCancel(ctx) // the last one goes out as the agent ends
	go func() {
		for {
			b.mu.Lock()
			p := b.next
			b.next = nil
			if p == nil {
				b.running = false
				if b.idle != nil {
					b.idle.Broadcast()
				}
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			a.cfg.Ports.Beat(ctx, p[0], p[1])
		}
	}()
}

// wait returns once no beat is being sent.
func (b *beats) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle == nil {
		b.idle = sync.NewCond(&b.mu)
	}
	for b.running {
		b.idle.Wait()
	}
}
