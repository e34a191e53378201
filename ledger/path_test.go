package ledger

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidatePath(t *testing.T) {
	t.Parallel()
	good := []string{"a", "data/aws/ec2/vpc/abc/state/1/raw", ".catalog-export.json", "a/.hidden/b", "a/..b/c", "é/ü",
		".syncledgerignore", "a/.syncledgerignore", "a/.syncledgerignore/b", ".syncledgerignore.bak", ".syncledger-x/y",
		strings.Repeat("n", MaxNameLen), strings.Repeat("デ", MaxNameLen/3) + "/x"}
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
		// Names the host's machinery reads at the cache root (issue 38 point
		// 10: a commit naming .syncledgerignore/x stopped every host's commit).
		".syncledgerignore/x":   ErrInvalid,
		".syncledgerignore/a/b": ErrInvalid,
		".SyncLedgerIgnore":     ErrInvalid,
		".SYNCLEDGERIGNORE/x":   ErrInvalid,
		".SyncLedger/state.db":  ErrInvalid,
		".ſyncledger/state.db":  ErrInvalid, // APFS and Go fold ſ to s
		".syncledgerıgnore":     ErrInvalid, // NTFS upper-cases ı to I
		".SYNCLEDGER":           ErrInvalid,
		// A name no file system of a host holds (NAME_MAX).
		strings.Repeat("n", MaxNameLen+1):     ErrTooLarge,
		"a/" + strings.Repeat("デ", 86) + "/b": ErrTooLarge, // 258 bytes, 86 UTF-16 units: NTFS holds it, ext4 does not
	}
	for p, want := range bad {
		err := ValidatePath(p)
		if !errors.Is(err, want) {
			t.Errorf("ValidatePath(%q) = %v, want %v", clip(p), err, want)
		}
	}
	// The limit is inclusive: 4096 bytes of 16-byte segments.
	if p := strings.Repeat(strings.Repeat("a", 15)+"/", 256)[:4095] + "b"; len(p) != MaxPathLen || ValidatePath(p) != nil {
		t.Errorf("%d-byte path refused: %v", len(p), ValidatePath(p))
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "/a", "../a", "a/..", "a//b", "a\\b", "a\x00", ".syncledger/x", "data/x/1/raw", ".syncledgerignore/x", ".SyncLedger/x"} {
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
			if seg == "" || seg == "." || seg == ".." || len(seg) > MaxNameLen {
				t.Fatalf("accepted %q with segment %q", p, clip(seg))
			}
		}
		if p == StateDir || strings.HasPrefix(p, StateDir+"/") || strings.HasPrefix(p, IgnoreFile+"/") {
			t.Fatalf("accepted reserved path %q", p)
		}
		first, _, _ := strings.Cut(p, "/")
		if strings.EqualFold(first, StateDir) || strings.EqualFold(first, IgnoreFile) && first != IgnoreFile {
			t.Fatalf("accepted %q, a reserved name on a case-insensitive file system", p)
		}
		if len(p) > MaxPathLen {
			t.Fatalf("accepted %d bytes", len(p))
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
