package natsblob

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/ledger/driver"
)

// Opener returns what opens a nats://BUCKET blob store on nc (blobs.Options'
// NATS): the bucket, with replicas replicas if it creates it.
func Opener(nc *nats.Conn) func(ctx context.Context, bucket string, replicas int) (driver.Bucket, error) {
	return func(ctx context.Context, bucket string, replicas int) (driver.Bucket, error) {
		s, err := New(ctx, Config{Conn: nc, Bucket: bucket, Replicas: replicas})
		if err != nil {
			return nil, err // not a nil *Store in a non-nil interface
		}
		return s, nil
	}
}
