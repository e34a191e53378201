package swamp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/swamp/index"
)

// DoctorConfig configures Doctor.
type DoctorConfig struct {
	// Cache is the swamp host's cache directory (~/.swamp/repos/{repoId}); the
	// sidecar is at its root, data files at {Cache}/[{ns}/]{rel}.
	Cache string
	// Remote is the datastore the cache syncs with; its root is swamp's client
	// prefix.
	Remote    *ledger.Bucket
	Namespace string
	// Repair rewrites the sidecar so that swamp's next pull takes its slow path
	// (see Sidecar.Disarm), after writing a backup of it. No data file is
	// touched.
	Repair bool
	// BackupDir receives the backup; "" means the cache's parent directory (a
	// file inside the cache could be pushed by swamp as a data file).
	BackupDir string
	// Now defaults to time.Now (it names the backup).
	Now func() time.Time
}

// State classifies a cache.
type State string

// States.
const (
	// Healthy: the cache has every file of the remote index, with its size and
	// sha256.
	Healthy State = "healthy"
	// Behind: files are missing or differ, and the sidecar arms no fast path:
	// swamp's next sync takes its slow path and fetches them.
	Behind State = "behind"
	// Armed: the #3193 state. The sidecar's commitSeq equals the remote's while
	// files are missing or differ, so every swamp pull takes the commitSeq fast
	// path and fetches nothing until some host commits again.
	Armed State = "armed"
	// StaleFingerprint: files are missing or differ and the sidecar holds a
	// monolith fingerprint (remoteIndexETag / remoteIndexGeneration) while the
	// remote has a monolith: if it still matches (a frozen monolith on a v2
	// remote, reference §4.4) swamp's pull fast path skips the missing files.
	StaleFingerprint State = "stale-fingerprint"
)

// FileDiff is a cache file that differs from its remote index entry.
type FileDiff struct {
	Path         string `json:"path"`
	RemoteSize   int64  `json:"remoteSize"`
	LocalSize    int64  `json:"localSize"`
	RemoteSHA256 string `json:"remoteSha256,omitempty"`
	LocalSHA256  string `json:"localSha256,omitempty"` // set when the sizes match and the remote has a sha256
}

// SidecarReport is what the doctor read from the sidecar.
type SidecarReport struct {
	Path             string `json:"path"`
	Present          bool   `json:"present"`
	Valid            bool   `json:"valid"` // swamp would load it
	Version          int    `json:"version,omitempty"`
	CommitSeq        *int64 `json:"commitSeq,omitempty"`
	FingerprintField string `json:"fingerprintField,omitempty"`
	Fingerprint      string `json:"fingerprint,omitempty"`
	LocalDirty       bool   `json:"localDirty"`
	LazyPullActive   bool   `json:"lazyPullActive"`
}

// RepairReport says what a repair did.
type RepairReport struct {
	Backup  string        `json:"backup,omitempty"`
	Changes []FieldChange `json:"changes"` // empty: nothing needed changing
}

// DoctorReport is the doctor's finding.
type DoctorReport struct {
	Cache     string        `json:"cache"`
	Namespace string        `json:"namespace,omitempty"`
	Format    Format        `json:"remoteFormat"`
	CommitSeq int64         `json:"remoteCommitSeq,omitempty"` // FormatV2
	Monolith  bool          `json:"remoteMonolith"`            // the remote holds .datastore-index.json
	Sidecar   SidecarReport `json:"sidecar"`
	Files     int           `json:"files"` // data files in the remote index
	Missing   []string      `json:"missing,omitempty"`
	Different []FileDiff    `json:"different,omitempty"`
	// LazyAbsent counts files absent on purpose (lazy hydration: data/**/raw
	// while the sidecar's lazyPullActive is set).
	LazyAbsent int           `json:"lazyAbsent,omitempty"`
	Invalid    []string      `json:"invalid,omitempty"` // remote paths that cannot be cache paths
	State      State         `json:"state"`
	Repair     *RepairReport `json:"repair,omitempty"`
}

// Findings is the number of files missing or different.
func (r DoctorReport) Findings() int { return len(r.Missing) + len(r.Different) }

// Doctor compares a swamp cache with its remote index (ReadRemote) and reads its
// sidecar, classifies the cache (State) and, with Repair, disarms the sidecar
// when the cache is not Healthy. It never writes a data file, and reads the
// cache's files only to stat and hash them.
func Doctor(ctx context.Context, cfg DoctorConfig) (DoctorReport, error) {
	rep := DoctorReport{Cache: cfg.Cache, Namespace: cfg.Namespace}
	if cfg.Cache == "" || cfg.Remote == nil {
		return rep, fmt.Errorf("swamp doctor: Cache and Remote are required: %w", ledger.ErrInvalid)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	layout, err := index.NewLayout(cfg.Namespace)
	if err != nil {
		return rep, fmt.Errorf("swamp doctor: %w", err)
	}
	if fi, err := os.Stat(cfg.Cache); err != nil || !fi.IsDir() {
		return rep, fmt.Errorf("swamp doctor: cache %s is not a directory: %w", cfg.Cache, ledger.ErrNotFound)
	}
	sidecarPath := filepath.Join(cfg.Cache, SidecarName)
	sc, err := readSidecar(sidecarPath, &rep.Sidecar)
	if err != nil {
		return rep, fmt.Errorf("swamp doctor: %w", err)
	}
	snap, err := ReadRemote(ctx, cfg.Remote, layout)
	if err != nil {
		return rep, fmt.Errorf("swamp doctor: %w", err)
	}
	if snap.Format == FormatListing && len(snap.Entries)+len(snap.Internal) == 0 {
		return rep, fmt.Errorf("swamp doctor: the remote holds no swamp datastore (no index, no objects; wrong URL or --namespace?): %w", ledger.ErrNotFound)
	}
	rep.Format, rep.CommitSeq, rep.Files = snap.Format, snap.CommitSeq, len(snap.Entries)
	rep.Monolith = snap.Monolith || snap.Format == FormatV1
	lazy := sc != nil && sc.Valid && sc.LazyPullActive
	for _, rel := range slices.Sorted(maps.Keys(snap.Entries)) {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("swamp doctor: %w", err)
		}
		if ledger.ValidatePath(rel) != nil {
			rep.Invalid = append(rep.Invalid, rel)
			continue
		}
		local := filepath.Join(cfg.Cache, filepath.FromSlash(layout.Key(rel)))
		d, missing, err := compareFile(local, snap.Entries[rel])
		switch {
		case err != nil:
			return rep, fmt.Errorf("swamp doctor: %w", err)
		case missing && lazy && ledger.IsLazySkippable(rel):
			rep.LazyAbsent++
		case missing:
			rep.Missing = append(rep.Missing, rel)
		case d != nil:
			rep.Different = append(rep.Different, *d)
		}
	}
	rep.State = classify(rep, sc, snap)
	if cfg.Repair && rep.State != Healthy && sc != nil && sc.Valid {
		rr, err := repair(sidecarPath, sc, cfg)
		rep.Repair = &rr
		if err != nil {
			return rep, fmt.Errorf("swamp doctor: repair: %w", err)
		}
	}
	return rep, nil
}

func classify(rep DoctorReport, sc *Sidecar, snap *Snapshot) State {
	if rep.Findings() == 0 {
		return Healthy
	}
	if sc == nil || !sc.Valid {
		return Behind // swamp treats the sidecar as absent: slow path
	}
	if snap.Format == FormatV2 && sc.CommitSeq != nil && *sc.CommitSeq == snap.CommitSeq {
		return Armed
	}
	if _, fp := sc.Fingerprint(); fp != "" && rep.Monolith {
		return StaleFingerprint
	}
	return Behind
}

func readSidecar(path string, r *SidecarReport) (*Sidecar, error) {
	r.Path = path
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r.Present = true
	sc, err := ParseSidecar(b)
	if err != nil {
		return nil, nil // swamp treats bad JSON as absent
	}
	r.Valid, r.Version, r.CommitSeq = sc.Valid, sc.Version, sc.CommitSeq
	r.FingerprintField, r.Fingerprint = sc.Fingerprint()
	r.LocalDirty, r.LazyPullActive = sc.LocalDirty, sc.LazyPullActive
	return sc, nil
}

// compareFile compares a cache file with its entry: size, then (sizes equal and
// the entry has one) sha256.
func compareFile(local string, e index.Entry) (*FileDiff, bool, error) {
	fi, err := os.Stat(local)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && fi.IsDir()) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	d := &FileDiff{Path: e.Key, RemoteSize: e.Size, LocalSize: fi.Size(), RemoteSHA256: e.SHA256}
	if !fi.Mode().IsRegular() || fi.Size() != e.Size {
		return d, false, nil
	}
	if e.SHA256 == "" {
		return nil, false, nil
	}
	f, err := os.Open(local)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, false, fmt.Errorf("hash %s: %w", local, err)
	}
	if d.LocalSHA256 = hex.EncodeToString(h.Sum(nil)); d.LocalSHA256 != e.SHA256 {
		return d, false, nil
	}
	return nil, false, nil
}

// repair writes a backup of the sidecar, then the disarmed sidecar (atomically:
// a temporary file in the cache root renamed over it, keeping its mode).
func repair(path string, sc *Sidecar, cfg DoctorConfig) (RepairReport, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return RepairReport{}, err
	}
	changes := sc.Disarm()
	rr := RepairReport{Changes: changes}
	if len(changes) == 0 {
		return rr, nil
	}
	dir := cfg.BackupDir
	if dir == "" {
		abs, err := filepath.Abs(cfg.Cache)
		if err != nil {
			return rr, err
		}
		dir = filepath.Dir(abs)
	}
	base := filepath.Base(filepath.Clean(cfg.Cache))
	name := fmt.Sprintf("%s%s.%s.bak", base, SidecarName, cfg.Now().UTC().Format("20060102T150405.000000000Z"))
	rr.Backup = filepath.Join(dir, name)
	if err := writeFileSync(rr.Backup, old, 0o600, true); err != nil {
		rr.Backup = ""
		return rr, fmt.Errorf("write backup (nothing changed): %w", err)
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp := path + ".syncledger-tmp"
	if err := writeFileSync(tmp, sc.Encode(), mode, false); err != nil {
		os.Remove(tmp)
		return rr, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return rr, err
	}
	return rr, fsx.SyncDir(filepath.Dir(path))
}

func writeFileSync(path string, b []byte, mode fs.FileMode, exclusive bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if exclusive {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
