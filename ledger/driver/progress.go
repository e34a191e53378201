package driver

import (
	"context"
	"io"
	"net/http"
)

// A put's progress. A driver that sends a put's content from a copy of its
// own (s3blob spools it; a multipart or chunked upload holds parts) is not
// paced by the reads of the content it was given: it reports each step of
// the sending instead, through the put's context (Progress), so that its
// caller's bound on a put that makes no progress — ledger.RetryPolicy's
// AttemptTimeout, a host's watch of its waits — starts again while bytes
// flow, and ends a put that moves nothing.

// progressKey carries a put's progress function in its context.
type progressKey struct{}

// WithProgress returns ctx carrying fn, called at each step of progress of
// the request made under it (Progress), after the function ctx already
// carried, if any. fn must be safe for concurrent use and cheap.
func WithProgress(ctx context.Context, fn func()) context.Context {
	if outer, ok := ctx.Value(progressKey{}).(func()); ok {
		inner := fn
		fn = func() { inner(); outer() }
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// Progress reports a step of progress of the request made under ctx: some
// of its content sent, a chunk acknowledged.
func Progress(ctx context.Context) {
	if fn, ok := ctx.Value(progressKey{}).(func()); ok {
		fn()
	}
}

// Doer is an HTTP client as the storage SDKs take one.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// ProgressClient wraps an HTTP client: each read of a request's body — as
// the transport writes it to the network, paced by it — is a step of
// progress of the request's context (Progress).
func ProgressClient(c Doer) Doer { return progressClient{c} }

type progressClient struct{ c Doer }

func (p progressClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		if _, ok := req.Context().Value(progressKey{}).(func()); ok {
			req.Body = &progressBody{req.Body, req.Context()}
		}
	}
	return p.c.Do(req)
}

// progressBody is a request's body whose reads are progress.
type progressBody struct {
	io.ReadCloser
	ctx context.Context
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		Progress(b.ctx)
	}
	return n, err
}
