package snapshot

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Prefix is the object key prefix under which snapshots live in a ledger's
// object store (beside ledger.BlobPrefix).
const Prefix = "snapshots/"

const suffix = ".snap.zst"

// Key returns the object key of the snapshot of ledger uuid at seq:
// snapshots/<uuid>/<seq, 20 digits>.snap.zst. Keys sort by seq.
func Key(uuid string, seq ledger.Seq) string {
	return fmt.Sprintf("%s%s/%020d%s", Prefix, uuid, uint64(seq), suffix)
}

// retentionKey holds the bound of the last retention run.
func retentionKey(uuid string) string { return Prefix + uuid + "/retention.json" }

// Info describes one stored snapshot, as listing finds it.
type Info struct {
	Key     string     `json:"key"`
	Ledger  string     `json:"ledger"`
	Seq     ledger.Seq `json:"seq"`
	Size    int64      `json:"size"`
	ModTime time.Time  `json:"modTime"`
}

// parseKey reads a snapshot key of ledger uuid; ok is false for other keys.
func parseKey(uuid, key string) (ledger.Seq, bool) {
	rest, ok := strings.CutPrefix(key, Prefix+uuid+"/")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, suffix)
	if !ok || len(num) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, false
	}
	return ledger.Seq(n), true
}

// List returns the snapshots of ledger uuid, newest (highest seq) first. Listing,
// not a pointer, decides which snapshot is newest: a snapshot is visible only
// once complete (ObjectStore.PutObject is atomic), so there is nothing to keep in
// step.
func List(ctx context.Context, objs ledger.ObjectStore, uuid string) ([]Info, error) {
	var out []Info
	err := objs.ListObjects(ctx, Prefix+uuid+"/", func(oi ledger.ObjectInfo) error {
		if seq, ok := parseKey(uuid, oi.Key); ok {
			out = append(out, Info{Key: oi.Key, Ledger: uuid, Seq: seq, Size: oi.Size, ModTime: oi.ModTime})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list snapshots of ledger %s: %w", uuid, err)
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(b.Seq, a.Seq) })
	return out, nil
}

// Put encodes s and stores it under Key(s.Ledger, s.Seq). Storing the same
// snapshot twice stores the same bytes.
func Put(ctx context.Context, objs ledger.ObjectStore, s *Snapshot) (Info, error) {
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		return Info{}, err
	}
	key := Key(s.Ledger, s.Seq)
	size := int64(buf.Len())
	if err := objs.PutObject(ctx, key, &buf, size); err != nil {
		return Info{}, fmt.Errorf("store snapshot %s: %w", key, err)
	}
	info := Info{Key: key, Ledger: s.Ledger, Seq: s.Seq, Size: size, ModTime: time.Now()}
	if oi, err := objs.StatObject(ctx, key); err == nil {
		info.ModTime = oi.ModTime
	}
	return info, nil
}

// Get reads and verifies the snapshot info lists. Besides Decode's checks, the
// snapshot must be of the ledger and seq its key names.
func Get(ctx context.Context, objs ledger.ObjectStore, info Info) (*Snapshot, error) {
	rc, err := objs.GetObject(ctx, info.Key)
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", info.Key, err)
	}
	defer rc.Close()
	s, err := Decode(rc)
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", info.Key, err)
	}
	if s.Ledger != info.Ledger || s.Seq != info.Seq {
		return nil, fmt.Errorf("read snapshot %s: it holds ledger %s at seq %d: %w", info.Key, s.Ledger, s.Seq, ledger.ErrInvalid)
	}
	return s, nil
}

// Delete removes a stored snapshot.
func Delete(ctx context.Context, objs ledger.ObjectStore, info Info) error {
	if err := objs.DeleteObject(ctx, info.Key); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", info.Key, err)
	}
	return nil
}

// Select returns the newest snapshot of ledger uuid that usable accepts (nil
// accepts all) and that reads back intact. A snapshot that does not (corrupt,
// truncated, unreadable) is reported to skipped (may be nil) and the next older
// one is tried. No such snapshot: an error wrapping ledger.ErrNotFound.
func Select(ctx context.Context, objs ledger.ObjectStore, uuid string, usable func(Info) bool, skipped func(Info, error)) (*Snapshot, Info, error) {
	infos, err := List(ctx, objs, uuid)
	if err != nil {
		return nil, Info{}, err
	}
	for _, info := range infos {
		if usable != nil && !usable(info) {
			continue
		}
		s, err := Get(ctx, objs, info)
		if err == nil {
			return s, info, nil
		}
		if ctx.Err() != nil {
			return nil, Info{}, ctx.Err()
		}
		if skipped != nil {
			skipped(info, err)
		}
	}
	return nil, Info{}, fmt.Errorf("no usable snapshot of ledger %s among %d: %w", uuid, len(infos), ledger.ErrNotFound)
}

type wireRetention struct {
	V      int        `json:"v"`
	Ledger string     `json:"ledger"`
	Before ledger.Seq `json:"before"`
}

// Retained returns the bound of the last retention run on ledger uuid: the log
// may lack any event below it (0: no retention ran). Each partition's last
// event may survive below it, so the log's first seq can be lower.
func Retained(ctx context.Context, objs ledger.ObjectStore, uuid string) (ledger.Seq, error) {
	rc, err := objs.GetObject(ctx, retentionKey(uuid))
	if errors.Is(err, ledger.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read retention bound of ledger %s: %w", uuid, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return 0, fmt.Errorf("read retention bound of ledger %s: %w", uuid, err)
	}
	var w wireRetention
	if err := strict(b, &w); err != nil || w.V != FormatVersion || w.Ledger != uuid {
		return 0, fmt.Errorf("read retention bound of ledger %s: malformed %s: %w", uuid, retentionKey(uuid), ledger.ErrInvalid)
	}
	return w.Before, nil
}

func PutRetained(ctx context.Context, objs ledger.ObjectStore, uuid string, before ledger.Seq) error {
	b, err := json.Marshal(wireRetention{V: FormatVersion, Ledger: uuid, Before: before})
	if err != nil {
		return err
	}
	if err := objs.PutObject(ctx, retentionKey(uuid), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("record retention bound of ledger %s: %w", uuid, err)
	}
	return nil
}

// Floor returns the lowest seq from which the log still holds every event: the
// larger of its first seq and the retention bound. A snapshot at seq N is usable
// for a rebuild when N+1 ≥ Floor (and N ≤ the log's last seq).
func Floor(ctx context.Context, log ledger.CommitLog, objs ledger.ObjectStore, uuid string) (ledger.Bounds, ledger.Seq, error) {
	b, err := log.Bounds(ctx)
	if err != nil {
		return b, 0, fmt.Errorf("read log bounds: %w", err)
	}
	r, err := Retained(ctx, objs, uuid)
	if err != nil {
		return b, 0, err
	}
	return b, max(b.First, r, 1), nil
}
