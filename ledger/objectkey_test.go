package ledger

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"a/b/c", true},
		{".hidden/...", true},
		{"blobs/sha256/ab/ab01", true},
		{"sp ace/é", true},
		{strings.Repeat("k", MaxKeyLen), true},
		{strings.Repeat("k", MaxKeyLen+1), false},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{".", false},
		{"..", false},
		{"a/./b", false},
		{"a/../b", false},
		{`a\b`, false},
		{"a\x00", false},
		{"a\tb", false},
		{"a\x7f", false},
		{"\xff", false},
	} {
		if validKey(tc.key) != tc.ok || (explainKey(tc.key) == nil) != tc.ok {
			t.Errorf("%q: validKey %v, explainKey %v, want ok %v", tc.key, validKey(tc.key), explainKey(tc.key), tc.ok)
		}
		err := ValidateKey(tc.key)
		if tc.ok && err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", tc.key, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalid", tc.key, err)
		}
	}
}

// FuzzValidKey: the one-pass check accepts exactly the keys the rule-by-rule
// one does.
func FuzzValidKey(f *testing.F) {
	for _, k := range []string{"a", "a/b", "a//b", "./a", "a/..", `a\b`, "a\x00", "é/\xff", "blobs/sha256/ab/ab01", "/", "a/"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if got, want := validKey(key), explainKey(key) == nil; got != want {
			t.Fatalf("validKey(%q) = %v, explainKey says %v", key, got, want)
		}
	})
}

func TestValidatePrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"a", true},
		{"a/", true},
		{"a/b", true},
		{"a/.", true}, // a partial segment: matches "a/.x"
		{"a/..", true},
		{"/", false},
		{"/a", false},
		{"a//", false},
		{"../", false},
		{"a/./", false},
		{`a\`, false},
	} {
		err := ValidatePrefix(tc.prefix)
		if tc.ok && err != nil {
			t.Errorf("ValidatePrefix(%q) = %v, want nil", tc.prefix, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidatePrefix(%q) = %v, want ErrInvalid", tc.prefix, err)
		}
	}
}
