package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// OpenKV opens a ledger's side bucket (heartbeats, swamp locks, swamp's control
// plane), creating it on first use with the ledger stream's replica count and
// a history of one. A ledger that does not exist is an error wrapping
// ledger.ErrNotFound: a side bucket never outlives or precedes its ledger.
func OpenKV(ctx context.Context, js jetstream.JetStream, ledgerName, bucket, description string) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	st, err := js.Stream(ctx, ledger.StreamName(ledgerName))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("ledger %q: %w", ledgerName, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: description,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(st.CachedInfo().Config.Replicas, 1),
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, bucket)
	}
	return kv, err
}
