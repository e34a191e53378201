package host

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
)

// HostIDFile, in a cache's state directory, holds the cache's host id.
const HostIDFile = "host-id"

// OriginFile, in a cache's state directory, records where the cache is
// (Origin): a cache found elsewhere is a copy, and gets a host id of its own.
const OriginFile = "host-origin.json"

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

// DefaultHostID is the host id a new cache takes when none is given:
// USER@HOST, the user and the machine's short hostname — what swamp's own
// locks name, and what people recognise in `syncledger hosts` (issue 39:
// hostname-and-random-suffix ids were not).
func DefaultHostID() string {
	name := "user"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
		if i := strings.LastIndexAny(name, `\/`); i >= 0 { // DOMAIN\user on Windows
			name = name[i+1:]
		}
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "host"
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return clip(name + "@" + h)
}

// clip keeps an id within ledger.MaxHostLen, leaving room for a suffix.
func clip(id string) string {
	if len(id) > ledger.MaxHostLen-8 {
		id = id[:ledger.MaxHostLen-8]
	}
	return strings.ToValidUTF8(id, "?")
}

// withSuffix is id with a random suffix: a second cache of the same user on
// the same machine (or on a machine of the same name) is another host.
func withSuffix(id string) (string, error) {
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%x", clip(id), suffix), nil
}

// MachineID identifies this machine: /etc/machine-id (or D-Bus's copy),
// else its hostname. A cache records it (Origin): found on another machine,
// it is a copy.
func MachineID() string {
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				return id
			}
		}
	}
	h, _ := os.Hostname()
	return "hostname:" + h
}

// CacheHostID returns the host id the cache at dir keeps, or the one a new
// cache would take (stored false): DefaultHostID, which OpenAs gives a
// suffix when another cache has it.
func CacheHostID(dir string) (id string, stored bool, err error) {
	id, stored, err = storedID(dir)
	if err != nil || stored {
		return id, stored, err
	}
	return DefaultHostID(), false, nil
}

func storedID(dir string) (string, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, ledger.StateDir, HostIDFile))
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, true, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read the cache's host id: %w", err)
	}
	return "", false, nil
}

// StoreHostID records id as the cache's host id unless another process
// recorded one first, and returns the one recorded. Call it once the cache is
// open (its state directory exists and this process holds the cache).
func StoreHostID(dir, id string) (string, error) {
	p := filepath.Join(dir, ledger.StateDir, HostIDFile)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		got, _, err := storedID(dir)
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

// Origin is where a cache is: the machine, the cache's absolute path, and
// the identity (device, inode) of its state directory, with the host id it
// has there. A cache whose origin is another machine, or another path and
// another state directory (a copy, not a move), is a copy of that host's
// cache: it gets a host id of its own (OpenAs).
type Origin struct {
	ID      string `json:"id"`
	Machine string `json:"machine"`
	Path    string `json:"path"`
	Dev     uint64 `json:"dev,omitempty"`
	Ino     uint64 `json:"ino,omitempty"`
}

// copyOf says whether a cache at here is a copy of the one at o.
func (o Origin) copyOf(here Origin) bool {
	if o.Machine != here.Machine {
		return true
	}
	moved := o.Dev == here.Dev && o.Ino == here.Ino && here.Ino != 0
	return o.Path != here.Path && !moved
}

// originHere is where the cache at dir is now, on machine.
func originHere(dir, machine string) Origin {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	o := Origin{Machine: machine, Path: abs}
	if fi, err := os.Stat(filepath.Join(dir, ledger.StateDir)); err == nil {
		o.Dev, o.Ino, _ = fsx.FileID(fi)
	}
	return o
}

func readOrigin(dir string) (Origin, bool) {
	var o Origin
	b, err := os.ReadFile(filepath.Join(dir, ledger.StateDir, OriginFile))
	if err != nil || json.Unmarshal(b, &o) != nil || o.Machine == "" {
		return Origin{}, false // none (a cache of an older release): taken as here
	}
	return o, true
}

// writeStateFile replaces the state directory's file name with b, atomically
// and durably (fsx.WriteDurably).
func writeStateFile(dir, name string, b []byte) error {
	state := filepath.Join(dir, ledger.StateDir)
	if err := fsx.WriteDurably(state, name, func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(state, name), err)
	}
	return nil
}

// IDConfig says how OpenAs names a cache's host.
type IDConfig struct {
	// Given is the host id given (--host, SYNCLEDGER_HOST, a swamp repo's
	// host file): the host opens as it. The cache still keeps an id of its
	// own for when none is given.
	Given string
	// Machine is this machine's id (MachineID, unless overridden).
	Machine string
	// Taken says whether another cache already uses id in the ledger (the
	// ledger's heartbeats know every host that synced); nil: none does. A
	// new cache whose DefaultHostID is taken gets a random suffix.
	Taken func(id string) bool
	// Note is told, once, what a person should know: a copied cache's new
	// id, a suffix added. nil: nobody is told.
	Note func(msg string)
}

// OpenAs opens the cache at dir with open (which binds it to the ledger)
// under its host id, and returns the host and the id it was opened as: c.Given
// if set, else the cache's own. A new cache records its own id once it is
// open — DefaultHostID, with a suffix where c.Taken says another cache has it
// — and where it is (Origin). A cache found on another machine, or copied to
// another directory, is another host: it gets a new id of its own, recorded
// at once, and c.Note says so (issue 39: a repo copied to a new laptop
// reported as the same host). When another process recorded an id first, a
// cache opened under a new id is opened again under the recorded one.
func OpenAs(dir string, c IDConfig, open func(id string) (*Host, error)) (*Host, string, error) {
	if c.Note == nil {
		c.Note = func(string) {}
	}
	id, stored, err := storedID(dir)
	if err != nil {
		return nil, "", err
	}
	here := originHere(dir, c.Machine)
	origin, hasOrigin := readOrigin(dir)
	copied := stored && hasOrigin && origin.copyOf(here)
	if !stored || copied {
		if id, err = newHostID(c.Taken); err != nil {
			return nil, "", err
		}
	}
	openAs := id
	if c.Given != "" {
		openAs = c.Given
	}
	h, err := open(openAs)
	if err != nil {
		return h, openAs, err
	}
	// The cache is held from here.
	here = originHere(dir, c.Machine) // a new cache's state directory exists now
	switch {
	case !stored:
		rec, err := StoreHostID(dir, id)
		if err != nil {
			_ = h.Close()
			return nil, "", err
		}
		if rec != id { // another process recorded one first
			if c.Given == "" {
				_ = h.Close()
				h, err = open(rec)
				return h, rec, err
			}
			return h, openAs, nil
		}
		if c.Given == "" && id != DefaultHostID() {
			c.Note(fmt.Sprintf("this cache is host %s: %s is another cache's in this ledger (syncledger hosts); give --host NAME to name it", id, DefaultHostID()))
		}
	case copied:
		if now, _ := readOrigin(dir); !now.copyOf(here) {
			// Another process gave the copy its id meanwhile.
			rec, _, err := storedID(dir)
			if err != nil || c.Given != "" || rec == id {
				return h, openAs, err
			}
			_ = h.Close()
			h, err = open(rec)
			return h, rec, err
		}
		if err := writeStateFile(dir, HostIDFile, []byte(id+"\n")); err != nil {
			_ = h.Close()
			return nil, "", fmt.Errorf("give the copied cache its own host id: %w", err)
		}
		where := origin.Path
		if origin.Machine != here.Machine {
			where = "another machine's " + where
		}
		switch {
		case c.Given == origin.ID:
			c.Note(fmt.Sprintf("this cache is a copy of host %s's (%s), and is given that host's id too (--host %s, SYNCLEDGER_HOST or a swamp repo's host file): give this host its own (syncledger swamp setup --repo REPO --host NAME, or --host NAME)",
				origin.ID, where, c.Given))
		case c.Given == "":
			c.Note(fmt.Sprintf("this cache is a copy of host %s's (%s): it is host %s here (give --host NAME to name it)", origin.ID, where, id))
		}
	}
	// Recorded where it is now: a new cache, a copy, one moved (the same
	// state directory at another path) or put back in place, or a cache of an
	// older release, which recorded nothing.
	here.ID = id
	if !hasOrigin || origin != here {
		if err := writeStateFile(dir, OriginFile, append(mustJSON(here), '\n')); err != nil {
			_ = h.Close()
			return nil, "", err
		}
	}
	return h, openAs, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// newHostID is a new cache's id: DefaultHostID, with a suffix if taken.
func newHostID(taken func(string) bool) (string, error) {
	id := DefaultHostID()
	if taken != nil && taken(id) {
		return withSuffix(id)
	}
	return id, nil
}

// KnownID returns the host id the cache at dir keeps, when it is this
// cache's own — recorded, and the cache not a copy found on another machine
// or path (which OpenAs gives a new one) — without opening the cache.
func KnownID(dir, machine string) (string, bool) {
	id, stored, err := storedID(dir)
	if err != nil || !stored {
		return "", false
	}
	if o, ok := readOrigin(dir); ok && o.copyOf(originHere(dir, machine)) {
		return "", false
	}
	return id, true
}
