package ledger

import "context"

// retryNoteKey carries an OnRetry function in a context.
type retryNoteKey struct{}

// OnRetry returns ctx carrying fn: an operation run under it that retries a
// request — a log's Append publishing a commit again — calls fn with what
// failed before it waits to try again, so that its caller can say what it is
// waiting for (a host's push shows it: projector/host, Wait). fn must be safe
// for concurrent use and must not block.
func OnRetry(ctx context.Context, fn func(op string, err error)) context.Context {
	return context.WithValue(ctx, retryNoteKey{}, fn)
}

// NoteRetry tells ctx's OnRetry function, if any, that op failed with err and
// is to be tried again.
func NoteRetry(ctx context.Context, op string, err error) {
	if fn, ok := ctx.Value(retryNoteKey{}).(func(string, error)); ok {
		fn(op, err)
	}
}
