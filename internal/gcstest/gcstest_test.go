package gcstest

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestServer(t *testing.T) {
	t.Parallel()
	a, b := Start(t), Start(t)
	if a.URL() == b.URL() {
		t.Fatalf("two servers at %s", a.URL())
	}
	a.CreateBucket(t, "bkt")
	name := "dir/a b+c"
	resp, err := http.Post(a.URL()+"/upload/storage/v1/b/bkt/o?uploadType=media&name="+url.QueryEscape(name),
		"application/octet-stream", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %s: %s", resp.Status, body)
	}
	if got, err := a.GetObject("bkt", name); err != nil || string(got) != "hello" {
		t.Fatalf("GetObject = %q, %v; want hello", got, err)
	}
	if _, err := a.GetObject("bkt", "missing"); err == nil {
		t.Fatal("GetObject of a missing object: no error")
	}
	if _, err := b.GetObject("bkt", name); err == nil {
		t.Fatal("the second server has the first one's object")
	}
}

// TestStartFailure checks that a server that exits before answering is an error
// naming its output, and one that could not bind is errAddrInUse (Start retries).
func TestStartFailure(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the fake servers are shell scripts")
	}
	for _, tc := range []struct {
		script string
		inUse  bool
	}{
		{"echo boom >&2; exit 3", false},
		{"echo 'listen tcp 127.0.0.1:1: bind: address already in use' >&2; exit 1", true},
	} {
		bin := filepath.Join(t.TempDir(), "fake")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := start(bin)
		if err == nil || errors.Is(err, errAddrInUse) != tc.inUse {
			t.Fatalf("start(%q) = %v, want an error (address in use: %v)", tc.script, err, tc.inUse)
		}
		if !tc.inUse && !strings.Contains(err.Error(), "boom") {
			t.Errorf("start(%q) = %v, want the server's output in it", tc.script, err)
		}
	}
}
