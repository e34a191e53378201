package swamp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestInstall(t *testing.T) {
	t.Parallel()
	repo, cache := t.TempDir(), t.TempDir()
	yml := "repoId: abc\n# a comment swamp wrote\ndatastoresDir: ext/ds\ndatastore:\n  type: filesystem\n  path: /old\n"
	if err := os.WriteFile(filepath.Join(repo, ".swamp.yaml"), []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"data/command/shell/x", "outputs", "secrets"} {
		if err := os.MkdirAll(filepath.Join(repo, ".swamp", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(cache, "outputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := ExtensionConfig{Binary: "/bin/syncledger", Cache: cache, NATS: "nats://127.0.0.1:4222", Ledger: "infra", Flags: []string{"--nats-creds", "/c"}}
	inst, err := Install(repo, "syncledger v1.2.3", cfg, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(repo, "ext", "ds", "syncledger.ts"); inst.Extension != want {
		t.Fatalf("extension at %s, want %s (datastoresDir)", inst.Extension, want)
	}
	src, _ := os.ReadFile(inst.Extension)
	if !strings.Contains(string(src), `WRITTEN_BY = "syncledger v1.2.3"`) || !strings.Contains(string(src), `type: "@syncledger/datastore"`) {
		t.Fatal("the written extension lacks its version or its type literal")
	}
	raw, _ := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	var got struct {
		RepoID    string `yaml:"repoId"`
		Datastore struct {
			Type              string          `yaml:"type"`
			Path              string          `yaml:"path"`
			HydrationStrategy string          `yaml:"hydrationStrategy"`
			Config            ExtensionConfig `yaml:"config"`
		} `yaml:"datastore"`
	}
	if err := yaml.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	d := got.Datastore
	if got.RepoID != "abc" || d.Type != ExtensionType || d.Path != "" || d.HydrationStrategy != "lazy" ||
		d.Config.Ledger != "infra" || d.Config.Cache != cache || len(d.Config.Flags) != 2 || !strings.Contains(string(raw), "a comment swamp wrote") {
		t.Fatalf(".swamp.yaml after install:\n%s", raw)
	}
	// data moved; outputs kept in the repo (the cache had its own); secrets never.
	if len(inst.Moved) != 1 || inst.Moved[0] != "data" {
		t.Fatalf("moved %q, want [data]", inst.Moved)
	}
	if _, err := os.Stat(filepath.Join(cache, "data", "command", "shell", "x")); err != nil {
		t.Fatal("data not in the cache")
	}
	if _, err := os.Stat(filepath.Join(repo, ".swamp", "secrets")); err != nil {
		t.Fatal("secrets moved")
	}
	if err := CheckRepo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "swamp repo init") {
		t.Fatalf("CheckRepo of a plain directory: %v", err)
	}
}
