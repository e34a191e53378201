package ledger

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidatePath(t *testing.T) {
	t.Parallel()
	good := []string{"a", "data/aws/ec2/vpc/abc/state/1/raw", ".catalog-export.json", "a/.hidden/b", "a/..b/c", "é/ü"}
	for _, p := range good {
		if err := ValidatePath(p); err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", p, err)
		}
	}
	bad := map[string]error{
		"":                        ErrInvalid,
		"/etc/passwd":             ErrInvalid,
		"../x":                    ErrInvalid,
		"a/../../x":               ErrInvalid,
		"a/./b":                   ErrInvalid,
		".":                       ErrInvalid,
		"a//b":                    ErrInvalid,
		"a/":                      ErrInvalid,
		"a\x00b":                  ErrInvalid,
		"a\\b":                    ErrInvalid,
		"..\\x":                   ErrInvalid,
		"a\nb":                    ErrInvalid,
		"\xff":                    ErrInvalid,
		".syncledger/state.db":    ErrInvalid,
		".syncledger":             ErrInvalid,
		strings.Repeat("a", 4097): ErrTooLarge,
	}
	for p, want := range bad {
		err := ValidatePath(p)
		if !errors.Is(err, want) {
			t.Errorf("ValidatePath(%q) = %v, want %v", clip(p), err, want)
		}
	}
	if err := ValidatePath(strings.Repeat("a", 4096)); err != nil {
		t.Errorf("4096-byte path refused: %v", err)
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "/a", "../a", "a/..", "a//b", "a\\b", "a\x00", ".syncledger/x", "data/x/1/raw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		// A valid path stays inside any root it is joined to, and is not the state dir.
		if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
			t.Fatalf("accepted %q", p)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted %q with segment %q", p, seg)
			}
		}
		if p == StateDir || strings.HasPrefix(p, StateDir+"/") {
			t.Fatalf("accepted state path %q", p)
		}
	})
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"default", "a", "A_b-9", strings.Repeat("x", 64)} {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", "a.b", "a b", "a*", strings.Repeat("x", 65), "é"} {
		if err := ValidateName(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

// clip never cuts a UTF-8 character in half (#14 point 5: the "too large"
// message of a Japanese partition key ended in half a character).
func TestClipKeepsUTF8Whole(t *testing.T) {
	t.Parallel()
	for _, s := range []string{strings.Repeat("デ", 80), "a" + strings.Repeat("デ", 80), "ab" + strings.Repeat("é", 100), strings.Repeat("x", 200)} {
		got := clip(s)
		if !utf8.ValidString(got) || len(got) > 120+len("…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
			t.Errorf("clip(%q) = %q", s, got)
		}
	}
	err := CheckPartitionToken("data--" + strings.Repeat("デ", 240))
	if !errors.Is(err, ErrTooLarge) || !utf8.ValidString(err.Error()) {
		t.Errorf("CheckPartitionToken = %v", err)
	}
}
