package natsjs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
)

// A ledger's backup is a directory holding one JetStream snapshot of each
// stream the ledger keeps on the server (snapshot.go), and backup.json, which
// lists them and is written last: a directory without it is no backup.
//
//	SYNCLEDGER_<ledger>          the log (with its durable consumers); its
//	                             metadata holds the ledger's settings, the
//	                             attestations, the retention bound and the
//	                             records of its mirrors (MirrorRecord)
//	OBJ_<bucket>                 the object store, when the blobs are on NATS
//	                             (nats://bucket): blobs and snapshots
//	KV_SYNCLEDGER_SWAMP_<ledger> swamp's locks, control plane and namespaces
//	KV_SYNCLEDGER_HOSTS_<ledger> the hosts' heartbeats
//	SYNCLEDGER-DLQ_<ledger>      the consumers' dead letters
//
// Consistency: each stream's snapshot is the stream at one point; the log's is
// taken first, then the object store's, so every blob an event of the backup
// references — stored before its event was published (content first) — is in
// the object store's snapshot, unless gc deleted it in between, which it does
// only to blobs no event it read references (the caller checks, Backup's doc).
// The buckets are taken after: locks and heartbeats a moment younger than the
// log, which neither needs to agree with. A blob store outside NATS (file, S3,
// GCS) is not copied: the caller lists the blobs the backup references
// (Backup.BlobKeys), and they must still be there when it is restored.

// BackupFormat is the layout version of a backup directory.
const BackupFormat = 1

// BackupFile names a backup's description, written last.
const BackupFile = "backup.json"

// Roles of the streams of a backup, in the order Backup takes them (the log
// first) and Restore restores them (the objects first: content before the
// events that reference it).
const (
	RoleLog         = "log"
	RoleObjects     = "objects"
	RoleSwamp       = "swamp"
	RoleHeartbeats  = "heartbeats"
	RoleDeadLetters = "dead-letters"
)

// Backup describes a ledger's backup directory (backup.json).
type Backup struct {
	Format int       `json:"format"`
	Ledger string    `json:"ledger"`
	UUID   string    `json:"uuid"`
	Blobs  string    `json:"blobs"` // the blob store's URL
	Taken  time.Time `json:"taken"`
	// Head is the log's last seq in the backup.
	Head ledger.Seq `json:"head"`
	// Attested are the attestations and the retention bound the log's
	// metadata holds in the backup.
	Attested ledger.Attestations `json:"attested"`
	// Mirrors are the mirrors the log's metadata records (mirror create):
	// a restore makes them anew.
	Mirrors []MirrorRecord `json:"mirrors,omitempty"`
	Streams []BackupStream `json:"streams"`
	// BlobKeys, set by the caller for a blob store outside NATS, names the
	// file of the backup listing the blobs it references, one digest a line
	// (BlobCount of them): the store must still hold them at a restore.
	BlobKeys  string `json:"blobKeys,omitempty"`
	BlobCount int    `json:"blobCount,omitempty"`
	// Missing names the streams a partial backup (BackupOptions.Partial)
	// did not find on the server, and MissingBlobs counts the blobs its log
	// references that the blob store lacked (set by the caller): what a
	// restore that failed part way had left of a ledger.
	Missing      []string `json:"missing,omitempty"`
	MissingBlobs int      `json:"missingBlobs,omitempty"`
}

// BackupStream is one stream of a backup: its snapshot and the archive's file.
type BackupStream struct {
	Role string `json:"role"`
	File string `json:"file"`
	StreamSnapshot
}

// BackupOptions say what a backup takes besides the log.
type BackupOptions struct {
	// ObjectStore is the object store bucket of a nats:// blob store ("":
	// blobs outside NATS).
	ObjectStore string
	// Partial takes what there is: a missing object store is recorded in
	// Backup.Missing instead of failing the backup (the log is still
	// required). For the ledger a restore replaces, which a restore that
	// failed part way may have left without it.
	Partial bool
}

// Backup writes a backup of the ledger into dir (created; it must hold no
// backup already) and returns its description, written as BackupFile last.
// It needs the admin role (a snapshot is a stream operation). The log is taken
// first; a missing object store named by opt is an error, missing buckets or
// dead letters (never used) are left out.
func (l *Ledger) Backup(ctx context.Context, dir string, opt BackupOptions) (*Backup, error) {
	// The server refuses a stream operation this user may not make without
	// answering it: the watch fails it at once.
	return guarded(&l.c.watches, streamAPI, ctx, func(ctx context.Context) (*Backup, error) { return l.backup(ctx, dir, opt) })
}

// streamAPI reports whether subject is of the stream API (a snapshot, a
// restore, a delete).
func streamAPI(subject string) bool { return strings.HasPrefix(subject, apiPrefix+"STREAM.") }

func (l *Ledger) backup(ctx context.Context, dir string, opt BackupOptions) (*Backup, error) {
	if _, err := os.Stat(filepath.Join(dir, BackupFile)); err == nil {
		return nil, fmt.Errorf("backup ledger %q: %s holds a backup already: %w", l.name, dir, ledger.ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backup ledger %q: %w", l.name, err)
	}
	b := &Backup{Format: BackupFormat, Ledger: l.name, Taken: time.Now().UTC()}
	type part struct {
		role, stream string
		required     bool
		consumers    bool
	}
	parts := []part{{RoleLog, StreamName(l.name), true, true}}
	if opt.ObjectStore != "" {
		parts = append(parts, part{RoleObjects, natsblob.StreamName(opt.ObjectStore), true, false})
	}
	parts = append(parts,
		part{RoleSwamp, KVStream(SwampBucket(l.name)), false, false},
		part{RoleHeartbeats, KVStream(HeartbeatBucket(l.name)), false, false},
		part{RoleDeadLetters, DeadLetterStream(l.name), false, true})
	for _, p := range parts {
		bs, err := l.backupStream(ctx, dir, p.role, p.stream, p.consumers)
		if errors.Is(err, ledger.ErrNotFound) && !p.required {
			continue
		}
		if errors.Is(err, ledger.ErrNotFound) && opt.Partial && p.role != RoleLog {
			b.Missing = append(b.Missing, p.stream)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("backup ledger %q: %w", l.name, err)
		}
		b.Streams = append(b.Streams, bs)
		if p.role == RoleLog {
			var cfg struct {
				Metadata map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(bs.Config, &cfg); err != nil {
				return nil, fmt.Errorf("backup ledger %q: the log's configuration: %w", l.name, err)
			}
			st, err := bs.Stats()
			if err != nil {
				return nil, fmt.Errorf("backup ledger %q: the log's state: %w", l.name, err)
			}
			b.UUID, b.Blobs, b.Head = cfg.Metadata[MetaUUID], cfg.Metadata[MetaBlobs], ledger.Seq(st.LastSeq)
			b.Attested = attestationsOf(cfg.Metadata)
			b.Mirrors = mirrorsOf(cfg.Metadata)
		}
	}
	return b, nil
}

// Describe writes b as dir's BackupFile, durably: the mark of a complete
// backup. Backup's caller writes it once it has added what it adds (BlobKeys).
func (b *Backup) Describe(dir string) error {
	j, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return fsx.WriteDurably(dir, BackupFile, func(f *os.File) error { _, err := f.Write(append(j, '\n')); return err })
}

// backupStream writes the snapshot of stream into dir; ledger.ErrNotFound
// when the stream does not exist.
func (l *Ledger) backupStream(ctx context.Context, dir, role, stream string, consumers bool) (BackupStream, error) {
	bs := BackupStream{Role: role, File: stream + ".arc.s2"}
	err := fsx.WriteDurably(dir, bs.File, func(f *os.File) error {
		var err error
		bs.StreamSnapshot, err = snapshotStream(ctx, l.c.w, l.c.cfg.Timeout, stream, consumers, f)
		return err
	})
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == codeStreamNotFound {
		return bs, fmt.Errorf("stream %s: %w", stream, ledger.ErrNotFound)
	}
	return bs, err
}

// ReadBackup reads the description of the backup in dir.
func ReadBackup(dir string) (*Backup, error) {
	j, err := os.ReadFile(filepath.Join(dir, BackupFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is no backup (no %s: not taken, or not finished): %w", dir, BackupFile, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var b Backup
	if err := json.Unmarshal(j, &b); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", filepath.Join(dir, BackupFile), err, ledger.ErrInvalid)
	}
	if b.Format != BackupFormat {
		return nil, fmt.Errorf("%s: backup format %d (this build reads %d): %w", filepath.Join(dir, BackupFile), b.Format, BackupFormat, ledger.ErrUnknownVersion)
	}
	return &b, nil
}

// Check reads every archive of the backup in dir and fails, naming it, if one
// is missing, or its size or digest is not the one its description records
// (a backup taken before digests were recorded is checked by size): a restore
// checks first, and changes nothing on the server when a file of the backup is
// damaged. errors.Is(err, ledger.ErrChecksum) holds for a damaged archive.
func (b *Backup) Check(dir string) error {
	for _, s := range b.Streams {
		if err := checkArchive(filepath.Join(dir, s.File), s.StreamSnapshot); err != nil {
			return fmt.Errorf("backup of ledger %q in %s: %w", b.Ledger, dir, err)
		}
	}
	return nil
}

func checkArchive(path string, snap StreamSnapshot) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if n != snap.Bytes {
		return fmt.Errorf("the archive %s has %d bytes, the backup recorded %d: it is damaged: %w", path, n, snap.Bytes, ledger.ErrChecksum)
	}
	if got := hex.EncodeToString(h.Sum(nil)); snap.SHA256 != "" && got != snap.SHA256 {
		return fmt.Errorf("the archive %s has sha256 %s, the backup recorded %s: it is damaged: %w", path, got, snap.SHA256, ledger.ErrChecksum)
	}
	return nil
}

// RestoreOptions say how Restore treats what exists.
type RestoreOptions struct {
	// Replace deletes each stream of the backup that exists before restoring
	// it (the ledger as it is now is lost: back it up first); otherwise an
	// existing one is an error wrapping ledger.ErrConflict, and nothing is
	// touched.
	Replace bool
}

// Restore brings back the backup in dir: each of its streams restored from
// its snapshot, the object store first (content before the events that name
// it), then the log, then the buckets and dead letters. Each stream comes back
// as it was, its configuration and metadata (the ledger's UUID, the
// attestations, the retention bound) included; the caller then applies this
// release's configuration (syncledger upgrade) and checks the attestations.
// It needs the admin role.
func (c *Client) Restore(ctx context.Context, dir string, opt RestoreOptions) (*Backup, error) {
	return guarded(&c.watches, streamAPI, ctx, func(ctx context.Context) (*Backup, error) { return c.restore(ctx, dir, opt) })
}

func (c *Client) restore(ctx context.Context, dir string, opt RestoreOptions) (*Backup, error) {
	b, err := ReadBackup(dir)
	if err != nil {
		return nil, err
	}
	if err := b.Check(dir); err != nil {
		return b, err
	}
	js, err := jetstream.New(c.w, jetstream.WithDefaultTimeout(c.cfg.Timeout))
	if err != nil {
		return nil, err
	}
	order := []string{RoleObjects, RoleLog, RoleSwamp, RoleHeartbeats, RoleDeadLetters}
	var streams []BackupStream
	for _, role := range order {
		for _, s := range b.Streams {
			if s.Role == role {
				streams = append(streams, s)
			}
		}
	}
	for _, s := range streams {
		if _, err := js.Stream(ctx, s.Stream); err == nil {
			if !opt.Replace {
				return b, fmt.Errorf("restore ledger %q: stream %s exists (restore replaces the ledger: take a backup of it first, then replace it): %w", b.Ledger, s.Stream, ledger.ErrConflict)
			}
		} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return b, fmt.Errorf("restore ledger %q: %w", b.Ledger, err)
		}
	}
	for _, s := range streams {
		if opt.Replace {
			if err := js.DeleteStream(ctx, s.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return b, fmt.Errorf("restore ledger %q: delete stream %s: %w", b.Ledger, s.Stream, err)
			}
		}
		f, err := os.Open(filepath.Join(dir, s.File))
		if err != nil {
			return b, fmt.Errorf("restore ledger %q: %w", b.Ledger, err)
		}
		st, err := restoreStream(ctx, c.w, c.cfg.Timeout, s.StreamSnapshot, f)
		f.Close()
		if err != nil {
			return b, fmt.Errorf("restore ledger %q: %w", b.Ledger, err)
		}
		want, _ := s.Stats()
		if st.LastSeq != want.LastSeq || st.Msgs != want.Msgs {
			return b, fmt.Errorf("restore ledger %q: stream %s came back with %d messages up to seq %d, the backup has %d up to seq %d",
				b.Ledger, s.Stream, st.Msgs, st.LastSeq, want.Msgs, want.LastSeq)
		}
	}
	return b, nil
}
