package gcstest

import (
	"io"
	"net/http"
	"net/url"
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
