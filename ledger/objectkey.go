// The key rules Bucket applies to every key and list prefix before a driver
// sees it, so that a key accepted by one backend is accepted by all of them.

package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key (in bytes) any backend accepts: S3's and GCS's limit.
const MaxKeyLen = 1024

// ValidateKey reports whether key is a portable object key: 1 to MaxKeyLen bytes of
// UTF-8, slash-separated segments that are neither empty, "." nor "..", no leading or
// trailing slash, no backslash and no control characters. The error wraps
// ErrInvalid.
func ValidateKey(key string) error {
	if validKey(key) {
		return nil // every key a put or a stat names: no allocation, one pass
	}
	return explainKey(key)
}

// explainKey is ValidateKey's reference: rule by rule, the error naming the
// first one key breaks.
func explainKey(key string) error {
	if key == "" {
		return fmt.Errorf("object key is empty: %w", ErrInvalid)
	}
	if err := checkChars(key); err != nil {
		return fmt.Errorf("object key %q: %w", key, err)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("object key %q: %w", key, err)
		}
	}
	return nil
}

// ValidatePrefix reports whether prefix is a valid ListObjects prefix: empty, or a
// string that could begin a valid key. Every complete segment (one followed by a
// slash) obeys ValidateKey's rules; the last, partial segment may be anything made of
// valid characters, including empty (a prefix ending in "/"). The error wraps
// ErrInvalid.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkChars(prefix); err != nil {
		return fmt.Errorf("list prefix %q: %w", prefix, err)
	}
	segs := strings.Split(prefix, "/")
	for _, seg := range segs[:len(segs)-1] {
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("list prefix %q: %w", prefix, err)
		}
	}
	return nil
}

// validKey reports in one pass, allocating nothing, whether explainKey
// accepts key (FuzzValidKey).
func validKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen {
		return false
	}
	ascii, seg := true, 0 // seg: where the current segment begins
	for i := 0; i <= len(key); i++ {
		if i == len(key) || key[i] == '/' {
			if s := key[seg:i]; s == "" || s == "." || s == ".." {
				return false
			}
			seg = i + 1
			continue
		}
		switch c := key[i]; {
		case c >= utf8.RuneSelf:
			ascii = false
		case c == '\\' || c < 0x20 || c == 0x7f:
			return false
		}
	}
	return ascii || utf8.ValidString(key)
}

func checkChars(s string) error {
	if len(s) > MaxKeyLen {
		return fmt.Errorf("longer than %d bytes: %w", MaxKeyLen, ErrInvalid)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("not valid UTF-8: %w", ErrInvalid)
	}
	for _, c := range s {
		switch {
		case c == '\\':
			return fmt.Errorf("contains a backslash: %w", ErrInvalid)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("contains control character %U: %w", c, ErrInvalid)
		}
	}
	return nil
}

func checkSegment(seg string) error {
	switch seg {
	case "":
		return fmt.Errorf("empty path segment (leading, trailing or double slash): %w", ErrInvalid)
	case ".", "..":
		return fmt.Errorf("path segment %q: %w", seg, ErrInvalid)
	}
	return nil
}
