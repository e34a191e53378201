package natsblob

import (
	"context"
	"errors"
	"sync"

	"github.com/synadia-io/orbit.go/jetstreamext"
)

// maxAsk bounds the subjects of one presence request.
const maxAsk = 256

// presence answers "does any metadata message name this key?" for a batch's
// blob keys, the questions asked while one request is in flight gathered into
// the next: one batched direct get of the last message of each key's
// metadata subject (multi_last), not a request per new blob. Its "no" is
// final — a key no message names is absent, and a put of it is a new version
// whatever raced it (pick) —; its "yes" is only that something was stored,
// which the full StatObject (pick: the first version that holds what it
// records) and BlobBatch's read-back then judge. An error leaves the question
// to the full StatObject.
type presence struct {
	s      *Store
	mu     sync.Mutex
	queue  []*question
	asking bool // a caller is sending the queue's requests
}

type question struct {
	subj  string
	done  chan struct{}
	found bool
	err   error
}

// present reports whether any metadata message names key.
func (p *presence) present(ctx context.Context, key string) (bool, error) {
	q := &question{subj: p.s.metaSubject(key), done: make(chan struct{})}
	p.mu.Lock()
	p.queue = append(p.queue, q)
	lead := !p.asking
	p.asking = true
	p.mu.Unlock()
	if lead {
		p.ask(ctx)
	}
	select {
	case <-q.done:
		return q.found, q.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// ask sends the queue's questions, maxAsk at a time, until it is empty.
func (p *presence) ask(ctx context.Context) {
	for {
		p.mu.Lock()
		qs := p.queue[:min(len(p.queue), maxAsk)]
		p.queue = p.queue[len(qs):]
		if len(qs) == 0 {
			p.asking = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		found, err := p.lastFor(ctx, qs)
		for _, q := range qs {
			q.found, q.err = found[q.subj], err
			close(q.done)
		}
	}
}

// lastFor returns the subjects of qs that hold a message.
func (p *presence) lastFor(ctx context.Context, qs []*question) (map[string]bool, error) {
	subjs := make([]string, len(qs))
	for i, q := range qs {
		subjs[i] = q.subj
	}
	msgs, err := jetstreamext.GetLastMsgsFor(ctx, p.s.js, StreamName(p.s.bucket), subjs, jetstreamext.GetLastMsgsBatchSize(len(subjs)))
	if err != nil {
		return nil, err
	}
	found := make(map[string]bool, len(subjs))
	for m, err := range msgs {
		if errors.Is(err, jetstreamext.ErrNoMessages) {
			break // none of them
		}
		if err != nil {
			return nil, err
		}
		found[m.Subject] = true
	}
	return found, nil
}
