package ledger

import (
	"fmt"
	"strings"
)

// SubjectRoot is the first token of every syncledger subject.
const SubjectRoot = "syncledger"

// StreamName returns the JetStream stream name of a ledger.
func StreamName(ledgerName string) string { return "SYNCLEDGER_" + ledgerName }

// SubjectPrefix returns "syncledger.<ledger>.p." — every event subject starts with it.
func SubjectPrefix(ledgerName string) string { return SubjectRoot + "." + ledgerName + ".p." }

// Subject returns the subject of a partition's events: syncledger.<ledger>.p.<token>.
func Subject(ledgerName, partition string) string {
	return SubjectPrefix(ledgerName) + EscapeToken(partition)
}

// PartitionFromSubject is the inverse of Subject.
func PartitionFromSubject(ledgerName, subject string) (string, error) {
	tok, ok := strings.CutPrefix(subject, SubjectPrefix(ledgerName))
	if !ok {
		return "", fmt.Errorf("parse subject %q: not a partition subject of ledger %q: %w", subject, ledgerName, ErrInvalid)
	}
	return UnescapeToken(tok)
}

const hexDigits = "0123456789ABCDEF"

func tokenSafe(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// EscapeToken makes s a single NATS subject token: every byte outside
// [A-Za-z0-9_-] becomes "~XX" (upper-case hex). "~" itself is escaped, so the mapping
// is reversible and collision-free, and no input can produce ".", "*", ">", "$",
// whitespace or non-ASCII in a subject. The empty string escapes to "~" (an
// otherwise impossible token).
func EscapeToken(s string) string {
	if s == "" {
		return "~"
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !tokenSafe(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// UnescapeToken reverses EscapeToken. It accepts only EscapeToken's exact output
// (upper-case hex, no escaped safe bytes), so each string has one token.
func UnescapeToken(tok string) (string, error) {
	if tok == "~" {
		return "", nil
	}
	if tok == "" {
		return "", fmt.Errorf("unescape token: empty: %w", ErrInvalid)
	}
	plain := true
	for i := 0; i < len(tok) && plain; i++ {
		plain = tokenSafe(tok[i])
	}
	if plain { // nothing escaped: the token is the string
		return tok, nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if tokenSafe(c) {
			b.WriteByte(c)
			continue
		}
		if c != '~' || i+2 >= len(tok) {
			return "", fmt.Errorf("unescape token %q: bad byte at %d: %w", tok, i, ErrInvalid)
		}
		hi, lo := strings.IndexByte(hexDigits, tok[i+1]), strings.IndexByte(hexDigits, tok[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("unescape token %q: bad escape at %d: %w", tok, i, ErrInvalid)
		}
		v := byte(hi<<4 | lo)
		if tokenSafe(v) {
			return "", fmt.Errorf("unescape token %q: needless escape at %d: %w", tok, i, ErrInvalid)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}
