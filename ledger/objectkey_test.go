package ledger

import (
	"context"
	"errors"
	"io"
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

func TestPutReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		size    int64
		wantErr error
	}{
		{"exact", "hello", 5, nil},
		{"unknown", "hello", -1, nil},
		{"empty", "", 0, nil},
		{"short", "hell", 5, ErrInvalid},
		{"long", "hello!", 5, ErrInvalid},
	} {
		pr := NewPutReader(context.Background(), strings.NewReader(tc.content), tc.size)
		b, err := io.ReadAll(pr)
		if tc.wantErr == nil {
			if err != nil || string(b) != tc.content || pr.Done() != nil || pr.N() != int64(len(tc.content)) {
				t.Errorf("%s: read %q, %v, Done %v, N %d", tc.name, b, err, pr.Done(), pr.N())
			}
			continue
		}
		if !errors.Is(err, tc.wantErr) || !errors.Is(pr.Done(), tc.wantErr) || !errors.Is(pr.Err(), tc.wantErr) {
			t.Errorf("%s: read error %v, Done %v, want %v", tc.name, err, pr.Done(), tc.wantErr)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	pr := NewPutReader(ctx, strings.NewReader("data"), -1)
	cancel()
	if _, err := io.ReadAll(pr); !errors.Is(err, context.Canceled) || !errors.Is(pr.Done(), context.Canceled) {
		t.Errorf("read after cancel = %v, want context.Canceled", err)
	}

	pr = NewPutReader(context.Background(), strings.NewReader("data"), -1)
	if _, err := pr.Read(make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	if err := pr.Done(); err == nil {
		t.Errorf("Done before EOF = nil, want an error")
	}
}

func TestCtxErr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sdkErr := errors.New("operation error: canceled")
	if err := CtxErr(ctx, sdkErr); err != sdkErr {
		t.Errorf("CtxErr(live ctx) = %v, want the error unchanged", err)
	}
	cancel()
	err := CtxErr(ctx, sdkErr)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, sdkErr) {
		t.Errorf("CtxErr(cancelled ctx) = %v, want it to wrap both", err)
	}
	if CtxErr(ctx, nil) != nil {
		t.Errorf("CtxErr(nil) != nil")
	}
}
