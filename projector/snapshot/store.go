package snapshot

import (
	"bytes"
	"cmp"
	"context"
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
	// Attested: the log attests a snapshot at Seq (ledger.Attestations), whose
	// stored bytes hash to SHA256. Only such a snapshot is read (Get).
	Attested bool          `json:"attested"`
	SHA256   ledger.Digest `json:"sha256,omitzero"`
}

// ErrNotAttested: a snapshot the log does not attest, or whose stored bytes
// do not hash to what it attests. The blob store is no authority (any role
// that writes blobs can write there; see ledger.Attestations): such a snapshot is
// never used.
var ErrNotAttested = errors.New("snapshot not attested by the log")

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
// once complete (Bucket.PutObject is atomic), so there is nothing to keep in
// step.
func List(ctx context.Context, objs *ledger.Bucket, uuid string) ([]Info, error) {
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

// Attest marks the snapshots infos (as List returns them) the log attests,
// with their digests.
func Attest(ctx context.Context, log ledger.CommitLog, infos []Info) ([]Info, error) {
	a, err := attested(ctx, log)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].SHA256, infos[i].Attested = a.Snapshots[infos[i].Seq]
	}
	return infos, nil
}

// ListAttested is List followed by Attest.
func ListAttested(ctx context.Context, log ledger.CommitLog, objs *ledger.Bucket, uuid string) ([]Info, error) {
	infos, err := List(ctx, objs, uuid)
	if err != nil {
		return nil, err
	}
	return Attest(ctx, log, infos)
}

func attested(ctx context.Context, log ledger.CommitLog) (ledger.Attestations, error) {
	a, err := log.Attested(ctx)
	if err != nil {
		return a, fmt.Errorf("read the log's attestations: %w", err)
	}
	return a, nil
}

// Put encodes s, stores it under Key(s.Ledger, s.Seq) and has the log attest
// it (only the admin role may: ledger.ErrPermission otherwise, and the stored
// object is never used). Storing the same snapshot twice stores the same bytes.
func Put(ctx context.Context, log ledger.CommitLog, objs *ledger.Bucket, s *Snapshot) (Info, error) {
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		return Info{}, err
	}
	sum := ledger.DigestOf(buf.Bytes())
	key := Key(s.Ledger, s.Seq)
	size := int64(buf.Len())
	if err := objs.PutObject(ctx, key, &buf, size); err != nil {
		return Info{}, fmt.Errorf("store snapshot %s: %w", key, err)
	}
	info := Info{Key: key, Ledger: s.Ledger, Seq: s.Seq, Size: size, ModTime: time.Now(), Attested: true, SHA256: sum}
	if oi, err := objs.StatObject(ctx, key); err == nil {
		info.ModTime = oi.ModTime
	}
	if err := log.AttestSnapshot(ctx, s.Seq, sum); err != nil {
		return Info{}, fmt.Errorf("store snapshot %s: %w", key, err)
	}
	return info, nil
}

// Get reads and verifies the snapshot info lists: the log must attest it
// (info.Attested, see Attest) and its stored bytes hash to the attested
// digest (else ErrNotAttested); besides Decode's checks, the snapshot must be
// of the ledger and seq its key names.
func Get(ctx context.Context, objs *ledger.Bucket, info Info) (*Snapshot, error) {
	if !info.Attested {
		return nil, fmt.Errorf("read snapshot %s: the log attests no snapshot at seq %d: %w", info.Key, info.Seq, ErrNotAttested)
	}
	rc, err := objs.GetObject(ctx, info.Key)
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", info.Key, err)
	}
	defer rc.Close()
	return read(rc, info)
}

// read is Get's checks of the snapshot r holds.
func read(r io.Reader, info Info) (*Snapshot, error) {
	vr := ledger.NewVerifyingReader(r, info.SHA256)
	s, err := Decode(vr)
	if err == nil {
		_, err = io.Copy(io.Discard, vr) // to the end, where the digest is checked
	}
	if vr.Mismatch() {
		return nil, fmt.Errorf("read snapshot %s: its stored bytes are not the ones the log attests: %w", info.Key, ErrNotAttested)
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", info.Key, err)
	}
	if s.Ledger != info.Ledger || s.Seq != info.Seq {
		return nil, fmt.Errorf("read snapshot %s: it holds ledger %s at seq %d: %w", info.Key, s.Ledger, s.Seq, ledger.ErrInvalid)
	}
	return s, nil
}

// Delete removes a stored snapshot.
func Delete(ctx context.Context, objs *ledger.Bucket, info Info) error {
	if err := objs.DeleteObject(ctx, info.Key); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", info.Key, err)
	}
	return nil
}

// Select returns the newest snapshot of ledger uuid that usable accepts (nil
// accepts all), that the log attests and that reads back intact. A snapshot
// that does not (not attested, corrupt, truncated, unreadable) is reported to
// skipped (may be nil) and the next older one is tried. No such snapshot: an
// error wrapping ledger.ErrNotFound.
func Select(ctx context.Context, log ledger.CommitLog, objs *ledger.Bucket, uuid string, usable func(Info) bool, skipped func(Info, error)) (*Snapshot, Info, error) {
	infos, err := ListAttested(ctx, log, objs, uuid)
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

// legacyRetained reads the retention bound an older release recorded beside
// the snapshots (snapshots/<uuid>/retention.json), for Adopt: the blob store
// is no authority on it any more (ledger.Attestations).
func legacyRetained(ctx context.Context, objs *ledger.Bucket, uuid string) (ledger.Seq, error) {
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

// Floor returns the lowest seq from which the log still holds every event: the
// larger of its first seq and the retention bound the log attests. A snapshot
// at seq N is usable for a rebuild when N+1 ≥ Floor (and N ≤ the log's last
// seq).
//
// A bound above the log's head + 1 is ignored: no retention run attests one
// (Retain's highest is a snapshot at the head with no margin), the log cannot
// have dropped events it never held, and taking it would leave no snapshot
// usable and no snapshot takeable — what a bound planted through an older
// release's adopt did (issue 38). The attestations are read before the
// bounds, so a retention run in between is read with a head at least its own.
// CheckRetention and SetRetention correct a wrong bound.
func Floor(ctx context.Context, log ledger.CommitLog) (ledger.Bounds, ledger.Seq, error) {
	a, err := attested(ctx, log)
	if err != nil {
		return ledger.Bounds{}, 0, err
	}
	b, err := log.Bounds(ctx)
	if err != nil {
		return b, 0, fmt.Errorf("read log bounds: %w", err)
	}
	return b, floorOf(b, a.Retained), nil
}

// floorOf is Floor's answer for bounds b and the attested bound retained.
func floorOf(b ledger.Bounds, retained ledger.Seq) ledger.Seq {
	if retained > b.Last+1 {
		retained = 0 // impossible: see Floor
	}
	return max(b.First, retained, 1)
}

// Object is one object under Prefix, as Inventory lists it.
type Object struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
	// Kind is "snapshot" (a snapshot key of this ledger: see Info), "retention"
	// (the bound a release before attestations recorded: never read but by a
	// legacy Adopt) or "other" (anything else: never read).
	Kind string `json:"kind"`
	Info *Info  `json:"snapshot,omitempty"` // a snapshot's, attestation marked
}

// Inventory returns every object under Prefix (every ledger's, and whatever
// else any role that writes blobs put there), in key order, the snapshots of
// ledger uuid marked as attested or not: the whole of what the object store
// says beside the blobs, for an admin to judge (snapshot --list).
func Inventory(ctx context.Context, log ledger.CommitLog, objs *ledger.Bucket, uuid string) ([]Object, error) {
	a, err := attested(ctx, log)
	if err != nil {
		return nil, err
	}
	out := []Object{}
	err = objs.ListObjects(ctx, Prefix, func(oi ledger.ObjectInfo) error {
		o := Object{Key: oi.Key, Size: oi.Size, ModTime: oi.ModTime, Kind: "other"}
		switch seq, ok := parseKey(uuid, oi.Key); {
		case ok:
			o.Kind = "snapshot"
			o.Info = &Info{Key: oi.Key, Ledger: uuid, Seq: seq, Size: oi.Size, ModTime: oi.ModTime}
			o.Info.SHA256, o.Info.Attested = a.Snapshots[seq]
		case oi.Key == retentionKey(uuid):
			o.Kind = "retention"
		}
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Prefix, err)
	}
	slices.SortFunc(out, func(x, y Object) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}
