package ledger

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeToken(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"data--aws--ec2--vpc--abc-123", "data--aws--ec2--vpc--abc-123"},
		{"_root", "_root"},
		{"a.b", "a~2Eb"},
		{"a*b>c", "a~2Ab~3Ec"},
		{"a b\tc", "a~20b~09c"},
		{"$JS", "~24JS"},
		{"~", "~7E"},
		{"data--@test--m", "data--~40test--m"},
		{"é", "~C3~A9"},
		{"", "~"},
	}
	for _, tt := range tests {
		got := EscapeToken(tt.in)
		if got != tt.want {
			t.Errorf("EscapeToken(%q) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := UnescapeToken(got)
		if err != nil || back != tt.in {
			t.Errorf("UnescapeToken(%q) = %q, %v; want %q", got, back, err, tt.in)
		}
	}
}

func TestUnescapeTokenRejects(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"", "a.b", "a~", "a~2", "a~2e", "~41", "a b", "a~ZZ", "*", ">"} {
		if got, err := UnescapeToken(tok); !errors.Is(err, ErrInvalid) {
			t.Errorf("UnescapeToken(%q) = %q, %v; want ErrInvalid", tok, got, err)
		}
	}
}

func TestSubject(t *testing.T) {
	t.Parallel()
	s := Subject("default", "data--a.b--*")
	if s != "syncledger.default.p.data--a~2Eb--~2A" {
		t.Fatalf("Subject = %q", s)
	}
	p, err := PartitionFromSubject("default", s)
	if err != nil || p != "data--a.b--*" {
		t.Fatalf("PartitionFromSubject = %q, %v", p, err)
	}
	if _, err := PartitionFromSubject("other", s); !errors.Is(err, ErrInvalid) {
		t.Fatalf("foreign ledger subject accepted: %v", err)
	}
}

// checkToken asserts the properties every escaped token must have.
func checkToken(t *testing.T, in string) {
	tok := EscapeToken(in)
	if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n$") || !utf8.ValidString(tok) {
		t.Fatalf("EscapeToken(%q) = %q: not a safe single token", in, tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] >= 0x80 {
			t.Fatalf("EscapeToken(%q) = %q: non-ASCII", in, tok)
		}
	}
	back, err := UnescapeToken(tok)
	if err != nil || back != in {
		t.Fatalf("round trip %q → %q → %q, %v", in, tok, back, err)
	}
}

func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"", "_root", "a.b", "~", "~7E", "*", ">", "$", " ", "é", "data--@x--y", "\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkToken(t, s)
		// Unescape accepts only canonical tokens: escaping what it returns gives the input back.
		if v, err := UnescapeToken(s); err == nil && EscapeToken(v) != s {
			t.Fatalf("UnescapeToken(%q) = %q, which escapes to %q", s, v, EscapeToken(v))
		}
	})
}
