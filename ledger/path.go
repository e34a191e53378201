package ledger

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxPathLen is the longest datastore-relative path accepted, in bytes. Every
// host holds a path of this length whatever its cache root's: a cache applies
// a path too long for one system call relative to the cache root's directory,
// one directory at a time (projector/cachefs).
const MaxPathLen = 4096

// MaxNameLen is the longest segment of a path accepted, in bytes: NAME_MAX of
// the file systems hosts use (ext4, XFS, btrfs, APFS: 255 bytes; NTFS: 255
// UTF-16 units, which 255 bytes of UTF-8 never exceed). A longer name is one
// some host cannot create, whatever its cache root.
const MaxNameLen = 255

// StateDir is the cache directory holding a host's own state; never synced, and no
// entry may target it.
const StateDir = ".syncledger"

// IgnoreFile is the file of ignore rules at a cache's root
// (projector/ignore): an ordinary file that syncs, which every host's scan
// and sync read. No entry may make it a directory.
const IgnoreFile = ".syncledgerignore"

// ValidatePath checks a datastore-relative path: non-empty, at most MaxPathLen
// bytes, valid UTF-8, slash-separated, not absolute, no empty, "." or ".."
// segments, no segment longer than MaxNameLen, no NUL, backslash or other
// control character, and none of the names the host's own machinery reads at
// the cache root (ReservedPath). Errors wrap ErrInvalid (ErrTooLarge for
// length) and quote the path.
func ValidatePath(p string) error {
	bad := func(why string) error { return fmt.Errorf("invalid path %q: %s: %w", clip(p), why, ErrInvalid) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPathLen:
		return fmt.Errorf("invalid path %q: %d bytes, limit %d: %w", clip(p), len(p), MaxPathLen, ErrTooLarge)
	case !utf8.ValidString(p):
		return bad("not UTF-8")
	case p[0] == '/':
		return bad("absolute")
	case strings.IndexByte(p, '\\') >= 0:
		return bad("backslash")
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f {
			return bad(fmt.Sprintf("control byte 0x%02x", c))
		}
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad(fmt.Sprintf("%q segment", seg))
		}
		if len(seg) > MaxNameLen {
			return fmt.Errorf("invalid path %q: a segment of %d bytes, limit %d: %w", clip(p), len(seg), MaxNameLen, ErrTooLarge)
		}
	}
	if why := ReservedPath(p); why != "" {
		return bad(why)
	}
	return nil
}

// ReservedPath says why p (slash-separated, relative to a cache root) names
// something the host's own machinery reads there, "" if it does not: the
// state directory (StateDir) or anything in it; the ignore file (IgnoreFile)
// as a directory, or anything under it; and either name spelt in other case
// (".SyncLedger", ".SYNCLEDGERIGNORE"), which is the same file on a
// case-insensitive file system (macOS, Windows) and another one elsewhere.
// Only the first segment matters: the host reads these at the cache root
// alone (a nested cache's state directory is never written: projector/ignore's
// forced rules).
func ReservedPath(p string) string {
	first, _, deeper := strings.Cut(p, "/")
	switch {
	case foldEqual(first, StateDir):
		return "inside " + StateDir
	case first == IgnoreFile && deeper:
		return IgnoreFile + " as a directory (it is the cache's file of ignore rules)"
	case foldEqual(first, IgnoreFile) && first != IgnoreFile:
		return fmt.Sprintf("%q is %s on a case-insensitive file system", first, IgnoreFile)
	}
	return ""
}

// foldEqual reports whether name is reserved, an ASCII name, under the case
// rules of the file systems hosts use: Unicode simple folding (APFS; Go's
// EqualFold, which also folds "ſ" to "s") and upper-casing each character
// (NTFS's table maps "ı" to "I", which folding does not: not EqualFold).
func foldEqual(name, reserved string) bool {
	return strings.EqualFold(name, reserved) || strings.Map(unicode.ToUpper, name) == strings.Map(unicode.ToUpper, reserved)
}

// clip shortens s for an error message to at most 120 bytes and "…", cutting
// at a character boundary so a message never holds half a UTF-8 character.
func clip(s string) string {
	const most = 120
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// IsToken reports whether s is 1 to max bytes (max <= 0: any number) of
// [A-Za-z0-9_-]: the rule of ledger, consumer and bucket names. (A loop, not a regexp: package-level
// regexps are compiled at every start of every command.)
func IsToken(s string, max int) bool {
	if s == "" || max > 0 && len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// ValidateName checks a ledger name: [A-Za-z0-9_-]{1,64}.
func ValidateName(name string) error {
	if !IsToken(name, 64) {
		return fmt.Errorf("invalid ledger name %q: want 1-64 of [A-Za-z0-9_-]: %w", clip(name), ErrInvalid)
	}
	return nil
}

// ValidateUUID checks the canonical lower-case textual form of a UUID.
func ValidateUUID(s string) error {
	if !isUUID(s) {
		return fmt.Errorf("invalid uuid %q: %w", clip(s), ErrInvalid)
	}
	return nil
}
