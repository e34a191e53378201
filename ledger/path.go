package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxPathLen is the longest datastore-relative path accepted, in bytes.
const MaxPathLen = 4096

// StateDir is the cache directory holding a host's own state; never synced, and no
// entry may target it.
const StateDir = ".syncledger"

// ValidatePath checks a datastore-relative path: non-empty, at most MaxPathLen
// bytes, valid UTF-8, slash-separated, not absolute, no empty, "." or ".."
// segments, no NUL, backslash or other control character, and not inside
// StateDir. Errors wrap ErrInvalid (ErrTooLarge for length) and quote the path.
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
	}
	if first, _, _ := strings.Cut(p, "/"); first == StateDir {
		return bad("inside " + StateDir)
	}
	return nil
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
