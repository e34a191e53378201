package swamp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/syncledger/syncledger/ledger"
)

func TestInstall(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	yml := "repoId: abc\n# a comment swamp wrote\ndatastoresDir: ext/ds\ndatastore:\n  type: filesystem\n  path: /old\n"
	if err := os.WriteFile(filepath.Join(repo, ".swamp.yaml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, ".swamp", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"_catalog.db", "_catalog.db-wal", "keep"} {
		if err := os.WriteFile(filepath.Join(repo, ".swamp", "data", f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ExtensionConfig{NATS: "nats://127.0.0.1:4222", Ledger: "infra"}
	host := HostConfig{Binary: "/bin/syncledger", Cache: "/c", Flags: []string{"--nats-creds", "/c.creds"}}
	inst, err := Install(repo, cfg, host, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".swamp", "data", "_catalog.db")); !os.IsNotExist(err) {
		t.Fatalf("swamp's data catalog of the old datastore is left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(repo, ".swamp", "data", "keep")); err != nil {
		t.Fatalf("install removed more than the catalog: %v", err)
	}
	if want := filepath.Join(repo, "ext", "ds", "syncledger.ts"); inst.Extension != want {
		t.Fatalf("extension at %s, want %s (datastoresDir)", inst.Extension, want)
	}
	src, _ := os.ReadFile(inst.Extension)
	if !bytes.Equal(src, extensionSource) || !strings.Contains(string(src), `type: "@syncledger/datastore"`) {
		t.Fatal("the written extension is not the embedded source")
	}
	raw, _ := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	var got struct {
		RepoID    string `yaml:"repoId"`
		Datastore struct {
			Type              string         `yaml:"type"`
			Path              string         `yaml:"path"`
			HydrationStrategy string         `yaml:"hydrationStrategy"`
			Config            map[string]any `yaml:"config"`
		} `yaml:"datastore"`
	}
	if err := yaml.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	d := got.Datastore
	want := map[string]any{"nats": "nats://127.0.0.1:4222", "ledger": "infra"}
	if got.RepoID != "abc" || d.Type != ExtensionType || d.Path != "" || d.HydrationStrategy != "lazy" || !strings.Contains(string(raw), "a comment swamp wrote") {
		t.Fatalf(".swamp.yaml after install:\n%s", raw)
	}
	if diff := cmp.Diff(want, d.Config); diff != "" {
		t.Fatalf("the datastore config holds more than the shared settings (-want +got):\n%s", diff)
	}
	var gotHost HostConfig
	b, err := os.ReadFile(filepath.Join(repo, HostFile))
	if err != nil || json.Unmarshal(b, &gotHost) != nil || !cmp.Equal(gotHost, host) || inst.HostFile == "" {
		t.Fatalf("host file %s: %v %s", inst.HostFile, err, b)
	}

	// Another host: other settings of its own, the same repo files.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, ".swamp.yaml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(other, cfg, HostConfig{Cache: "/elsewhere", Host: "h2"}, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".swamp.yaml", "ext/ds/syncledger.ts"} {
		a, _ := os.ReadFile(filepath.Join(repo, f))
		b, _ := os.ReadFile(filepath.Join(other, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the hosts:\n%s\n---\n%s", f, a, b)
		}
	}
	// No settings of its own: no host file (an old one is removed).
	if _, err := Install(other, cfg, HostConfig{}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, HostFile)); !os.IsNotExist(err) {
		t.Fatalf("host file left after a setup without host settings: %v", err)
	}
	if err := CheckRepo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "swamp repo init") {
		t.Fatalf("CheckRepo of a plain directory: %v", err)
	}
}

func TestReadDatastore(t *testing.T) {
	t.Setenv("SWAMP_TEST_DIR", "/srv/ds")
	repo := t.TempDir()
	for _, tc := range []struct {
		block string
		want  Datastore
		err   string
	}{
		{"", Datastore{Type: "filesystem", Path: filepath.Join(repo, ".swamp"), Source: "file://" + filepath.Join(repo, ".swamp"), Dirs: true}, ""},
		{"datastore:\n  type: filesystem\n  path: $SWAMP_TEST_DIR/x\n", Datastore{Type: "filesystem", Path: "/srv/ds/x", Source: "file:///srv/ds/x", Dirs: true}, ""},
		{"datastore:\n  type: filesystem\n  path: rel\n  namespace: ci\n", Datastore{Type: "filesystem", Path: filepath.Join(repo, "rel"), Namespace: "ci", Source: "file://" + filepath.Join(repo, "rel"), Dirs: true}, ""},
		{"datastore:\n  type: filesystem\n  path: ${SWAMP_TEST_UNSET}/x\n", Datastore{}, "SWAMP_TEST_UNSET"},
		{"datastore:\n  type: '@swamp/s3-datastore'\n  config:\n    bucket: b\n    prefix: p/q\n    region: eu-west-1\n    endpoint: http://127.0.0.1:7070\n    forcePathStyle: true\n",
			Datastore{Type: "@swamp/s3-datastore", Source: "s3://b/p/q?endpoint=http%3A%2F%2F127.0.0.1%3A7070&path-style=true&region=eu-west-1"}, ""},
		{"datastore:\n  type: s3\n  bucket: b\n  region: us-east-1\n", Datastore{Type: "@swamp/s3-datastore", Source: "s3://b/?region=us-east-1"}, ""},
		{"datastore:\n  type: '@swamp/gcs-datastore'\n  config:\n    bucket: g\n    prefix: team\n  namespace: ci\n", Datastore{Type: "@swamp/gcs-datastore", Namespace: "ci", Source: "gs://g/team"}, ""},
		{"datastore:\n  type: '@syncledger/datastore'\n  config:\n    ledger: x\n", Datastore{Type: ExtensionType}, ""},
		{"datastore:\n  type: '@acme/other'\n", Datastore{}, "@acme/other, which syncledger cannot read"},
	} {
		if err := os.WriteFile(filepath.Join(repo, ".swamp.yaml"), []byte("repoId: r\n"+tc.block), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadDatastore(repo)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one naming %q", tc.block, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.block, err)
		} else if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.block, diff)
		}
	}
}

// TestOnlyDatastoreDirs: a filesystem datastore is read as its data
// directories; swamp's local-only files are neither listed nor read.
func TestOnlyDatastoreDirs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newMemStore()
	for _, k := range []string{"data/t/id/result/1/raw", "outputs/t/x.yaml", "secrets/keyfile", "run_tracker.db", "datax/y", "ci/data/t/z", "_index/_meta.json"} {
		if err := src.PutObject(ctx, k, strings.NewReader(k), int64(len(k))); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"data/t/id/result/1/raw", "outputs/t/x.yaml"}},
		{"ci/", []string{"ci/data/t/z"}},
	} {
		objs := OnlyDatastoreDirs(src, tc.prefix)
		var got []string
		if err := objs.ListObjects(ctx, "", func(o ledger.ObjectInfo) error { got = append(got, o.Key); return nil }); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("prefix %q lists (-want +got):\n%s", tc.prefix, diff)
		}
		for _, k := range []string{"secrets/keyfile", "_index/_meta.json"} {
			if _, err := objs.GetObject(ctx, k); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("prefix %q: get %s: %v, want not found", tc.prefix, k, err)
			}
		}
	}
}
