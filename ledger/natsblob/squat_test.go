package natsblob

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// TestSquattedBlobKey: whoever may put objects (the host role) stores metadata
// under the blob key of predictable content first, pointing at other bytes —
// claiming the content's own digest, or the other bytes' digest, or chunks
// that were never stored. An honest put of that content is not taken as
// already stored (on the main of issue 26 it was: "already stored", and
// every reader then stopped at a checksum mismatch): it stores a new version,
// and every reader, through a store of its own, reads the content.
func TestSquattedBlobKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nc := startServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	digestOfBytes := func(b []byte) string {
		d := ledger.DigestOf(b)
		return "SHA-256=" + base64.URLEncoding.EncodeToString(d[:])
	}
	for i, tc := range []struct {
		name  string
		lie   func(content, other []byte) (nuid string, digest string)
		chunk bool // the squatter stores its chunk
	}{
		{"claims the content's digest", func(c, _ []byte) (string, string) { return "SQUAT", digestOfBytes(c) }, true},
		{"records the other bytes' digest", func(_, o []byte) (string, string) { return "SQUAT", digestOfBytes(o) }, true},
		{"names chunks never stored", func(c, _ []byte) (string, string) { return "NONE", digestOfBytes(c) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "squat" + string(rune('a'+i))
			s, err := New(ctx, Config{Conn: nc, Bucket: name})
			if err != nil {
				t.Fatal(err)
			}
			content := []byte("predictable content " + tc.name)
			other := bytes.Repeat([]byte{'z'}, len(content))
			d := ledger.DigestOf(content)
			key := ledger.BlobKey(d)
			nuid, digest := tc.lie(content, other)
			if tc.chunk {
				if _, err := js.Publish(ctx, s.chunkSubject(nuid), other); err != nil {
					t.Fatal(err)
				}
			}
			oi := jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{Name: key}, Bucket: name, NUID: nuid,
				Size: uint64(len(content)), Chunks: 1, Digest: digest}
			b, _ := json.Marshal(oi)
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: s.metaSubject(key), Data: b}); err != nil {
				t.Fatal(err)
			}

			// The honest commit's put.
			if err := bucket(s).Put(ctx, d, bytes.NewReader(content), int64(len(content))); err != nil {
				t.Fatalf("honest put over a squatted key: %v", err)
			}
			// Every reader reads the content, and its size.
			r, err := New(ctx, Config{Conn: nc, Bucket: name})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ledger.ReadBlob(ctx, bucket(r), d)
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("a reader after the honest put: %q, %v", got, err)
			}
			if info, err := bucket(r).StatObject(ctx, key); err != nil || info.Size != int64(len(content)) {
				t.Errorf("stat after the honest put: %+v %v", info, err)
			}
			// A later lie changes nothing, and a second honest put finds it stored.
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: s.metaSubject(key), Data: b}); err != nil {
				t.Fatal(err)
			}
			if err := bucket(s).Put(ctx, d, bytes.NewReader(content), int64(len(content))); err != nil {
				t.Fatal(err)
			}
			if got, err := ledger.ReadBlob(ctx, bucket(r), d); err != nil || !strings.EqualFold(string(got), string(content)) {
				t.Fatalf("a reader after a later lie: %q, %v", got, err)
			}
		})
	}
}
