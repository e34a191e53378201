package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/blobs"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// probeTimeout bounds the whole blob store probe.
const probeTimeout = time.Minute

// probeBlobs checks that the blob store at raw works with this process's
// credentials before a ledger is created on it: it writes a probe object
// (probes/…, outside the blobs/ prefix), reads it back and deletes it. A store
// that does not open, refuses the write or the read, or gives back other
// content is an error naming the step; a refused delete is only a warning (a
// bucket policy may rightly deny deletes).
func (a *app) probeBlobs(ctx context.Context, raw string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	fail := func(step string, err error) error {
		return fmt.Errorf("the blob store %s does not work (%s): %w; check its URL and credentials — nothing was created", redactURL(raw), step, err)
	}
	if _, err := a.hardenBlobs(ctx, raw, 1); err != nil { // a NATS bucket opens only as syncledger makes it
		return fail("create", err)
	}
	objs, err := a.openBucket(ctx, raw, ledger.RetryPolicy{Attempts: 1}) // a probe: fail fast
	if err != nil {
		return fail("open", err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	key := "probes/init-" + hex.EncodeToString(id[:])
	content := []byte("syncledger init probe " + key)
	if err := objs.PutObject(ctx, key, bytes.NewReader(content), int64(len(content))); err != nil {
		return fail("write "+key, err)
	}
	rc, err := objs.GetObject(ctx, key)
	if err != nil {
		return fail("read "+key+" back", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return fail("read "+key+" back", err)
	}
	if !bytes.Equal(got, content) {
		return fail("read "+key+" back", fmt.Errorf("got %d other bytes: %w", len(got), ledger.ErrChecksum))
	}
	if err := objs.DeleteObject(ctx, key); err != nil {
		a.logger.Warn("could not delete the blob store probe (a policy that denies deletes is right for hosts); remove it by hand", "key", key, "err", err)
	}
	a.logger.Debug("blob store probe passed", "blobs", redactURL(raw))
	return nil
}

// protector is a blob driver that can tell whether its bucket keeps stored
// objects from being deleted or overwritten by itself (S3 and GCS: versioning
// or an object lock; a NATS bucket: written once). These are an admin's checks
// of a backend's own settings, not operations of the blob store: they are
// asked of the driver (blobs.OpenDriver), not of the ledger.Bucket.
type protector interface {
	Protection(ctx context.Context) (protected bool, how string, err error)
}

// hardenBlobs makes the blob store at raw as syncledger makes it where it
// can (an admin's init, serve and upgrade): a NATS bucket is created, or made
// write-once if it was made without it (by nats.go's object store, or an
// older syncledger), which natsjs refuses to open until then. It reports
// what it did, if anything.
func (a *app) hardenBlobs(ctx context.Context, raw string, replicas int) (natsjs.Change, error) {
	spec, err := blobs.ParseURL(raw)
	if err != nil || spec.Scheme != blobs.SchemeNATS {
		return natsjs.Change{}, nil
	}
	if spec.Replicas > 0 {
		replicas = spec.Replicas
	}
	c, err := a.NATS(ctx)
	if err != nil {
		return natsjs.Change{}, err
	}
	ch, err := c.UpgradeObjectStore(ctx, spec.Bucket, replicas)
	if err != nil {
		return ch, fmt.Errorf("the blob store %s: %w", redactURL(raw), err)
	}
	if ch.Action == "changed" {
		a.logger.Info("the blob store's bucket is now as syncledger makes it (written once: roll-ups and message deletes are refused)", "blobs", redactURL(raw), "settings", ch.Settings)
	}
	return ch, nil
}

// protectBlobs turns on the protection of the blob store at raw where it can
// (an admin's init and serve), and warns when the store does not protect
// stored blobs from a holder of write credentials (docs/ops.md, Threat model).
// It never fails the command.
func (a *app) protectBlobs(ctx context.Context, raw string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := a.hardenBlobs(ctx, raw, 1); err != nil {
		a.logger.Warn("could not make the blob store's bucket as syncledger makes it", "err", err)
	}
	objs, err := a.openDriver(ctx, raw)
	if err != nil {
		a.logger.Warn("could not check whether the blob store protects stored blobs", "blobs", redactURL(raw), "err", err)
		return
	}
	defer objs.Close()
	p, ok := objs.(protector)
	if !ok {
		return // a directory: its file permissions protect it
	}
	protected, how, err := p.Protection(ctx)
	switch {
	case err != nil:
		a.logger.Warn("could not check whether the blob store protects stored blobs", "blobs", redactURL(raw), "err", err)
	case !protected:
		if spec, err := blobs.ParseURL(raw); err == nil && spec.Scheme == blobs.SchemeNATS {
			how += ": " + unprotectedNote
		}
		a.logger.Warn("the blob store does not protect stored blobs: anyone with its write credentials can delete or overwrite them; see docs/ops.md, Threat model, for the bucket policy",
			"blobs", redactURL(raw), "why", how)
	default:
		a.logger.Debug("the blob store protects stored blobs", "blobs", redactURL(raw), "how", how)
	}
}
