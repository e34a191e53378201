package host

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/syncledger/syncledger/ledger"
)

// HostIDFile, in a cache's state directory, holds the cache's host id.
const HostIDFile = "host-id"

// FindCache walks up from dir to the nearest directory holding a state
// directory (ledger.StateDir), as git finds its repository.
func FindCache(dir string) (string, bool) {
	for {
		if fi, err := os.Stat(filepath.Join(dir, ledger.StateDir)); err == nil && fi.IsDir() {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// CacheHostID returns the host id the cache at dir keeps, or a new one
// (stored false) for a cache that has none: the machine's hostname and a
// random suffix, so that two caches on one machine are two hosts (in the
// heartbeats, `hosts` and the dashboard).
func CacheHostID(dir string) (id string, stored bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ledger.StateDir, HostIDFile))
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, true, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read the cache's host id: %w", err)
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "host"
	}
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", false, err
	}
	return fmt.Sprintf("%.240s-%x", name, suffix), false, nil
}

// StoreHostID records id as the cache's host id unless another process
// recorded one first, and returns the one recorded. Call it once the cache is
// open (its state directory exists and this process holds the cache).
func StoreHostID(dir, id string) (string, error) {
	p := filepath.Join(dir, ledger.StateDir, HostIDFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		got, _, err := CacheHostID(dir)
		return got, err
	}
	if err != nil {
		return "", fmt.Errorf("store the cache's host id: %w", err)
	}
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p)
		return "", fmt.Errorf("store the cache's host id: %w", err)
	}
	return id, nil
}

// OpenAs opens the cache at dir with open (which binds it to the ledger) under
// its host id: given (--host) if not empty, else the cache's own
// (CacheHostID). A cache records its id when it is first opened — given if
// set, else the new one — and when another process recorded one first, a
// cache opened under a new id is opened again under the recorded one. It
// returns the host and the id it was opened as.
func OpenAs(dir, given string, open func(id string) (*Host, error)) (*Host, string, error) {
	id, stored, err := CacheHostID(dir)
	if err != nil {
		return nil, "", err
	}
	if given != "" {
		id = given
	}
	h, err := open(id)
	if err != nil || stored {
		return h, id, err
	}
	// The cache is held from here: a new cache's id is recorded now, once it
	// opened. Another process that opened it first may have recorded its own.
	rec, err := StoreHostID(dir, id)
	if err != nil {
		_ = h.Close()
		return nil, "", err
	}
	if rec != id && given == "" {
		_ = h.Close()
		h, err = open(rec)
		return h, rec, err
	}
	return h, id, nil
}
