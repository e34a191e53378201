package swamp

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ExtensionType is the datastore type the extension registers with swamp.
const ExtensionType = "@syncledger/datastore"

//go:embed extension/syncledger.ts
var extensionSource string

// versionMark is replaced by the writing binary's version (WRITTEN_BY).
const versionMark = `"__SYNCLEDGER_VERSION__"`

// Extension returns the extension's source as written for a binary of version.
func Extension(version string) []byte {
	v, _ := json.Marshal(version)
	return []byte(strings.Replace(extensionSource, versionMark, string(v), 1))
}

// ExtensionConfig is the extension's config (the datastore's "config" in
// .swamp.yaml; configSchema in extension/syncledger.ts).
type ExtensionConfig struct {
	Binary    string   `json:"binary" yaml:"binary"`
	Cache     string   `json:"cache" yaml:"cache"`
	NATS      string   `json:"nats" yaml:"nats"`
	Ledger    string   `json:"ledger" yaml:"ledger"`
	Namespace string   `json:"namespace,omitempty" yaml:"namespace,omitempty"` // the ledger is then the base (NamespaceLedger)
	Host      string   `json:"host,omitempty" yaml:"host,omitempty"`
	Flags     []string `json:"flags,omitempty" yaml:"flags,omitempty"`
	LockTTLMs int64    `json:"lockTtlMs,omitempty" yaml:"lockTtlMs,omitempty"`
}

// movedDirs are the directories of a repo's .swamp/ that swamp's own datastore
// setup moves into an extension's cache (reference §2); Install does the same.
var movedDirs = []string{"definitions-evaluated", "workflows-evaluated", "data", "outputs", "workflow-runs", "audit"}

// Installed says what Install did.
type Installed struct {
	Extension string   `json:"extension"` // the file written
	Config    string   `json:"config"`    // .swamp.yaml
	Moved     []string `json:"moved,omitempty"`
}

// CheckRepo checks that repo is a swamp repo (it has .swamp.yaml), without
// writing anything.
func CheckRepo(repo string) error {
	if _, err := os.Stat(filepath.Join(repo, ".swamp.yaml")); err != nil {
		return fmt.Errorf("%s is not a swamp repo (no .swamp.yaml): run 'swamp repo init' there first", repo)
	}
	return nil
}

// Install writes the extension of version into repo, points the datastore of
// repo's .swamp.yaml at it with cfg (what `swamp datastore setup extension`
// writes; other keys are kept), and moves the repo's local datastore
// directories into cfg.Cache where the cache has none yet.
//
// With a namespace, swamp names the datastore's files NS/…: the datastore
// block gets namespace: NS and the moved directories go under CACHE/NS/.
func Install(repo, version string, cfg ExtensionConfig, lazy bool, namespace string) (Installed, error) {
	var out Installed
	yml := filepath.Join(repo, ".swamp.yaml")
	raw, err := os.ReadFile(yml)
	if err != nil {
		return out, fmt.Errorf("%s is not a swamp repo (no .swamp.yaml): run 'swamp repo init' there first", repo)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return out, fmt.Errorf("read %s: %w", yml, err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return out, fmt.Errorf("read %s: not a mapping", yml)
	}
	dir := "extensions/datastores"
	if d := mapGet(root, "datastoresDir"); d != nil && d.Value != "" {
		dir = d.Value
	}
	ds := map[string]any{"type": ExtensionType, "config": cfg}
	if lazy {
		ds["hydrationStrategy"] = "lazy"
	}
	if namespace != "" {
		ds["namespace"] = namespace
	}
	var node yaml.Node
	if err := node.Encode(ds); err != nil {
		return out, err
	}
	mapSet(root, "datastore", &node)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return out, err
	}
	newYAML := buf.Bytes()
	out.Extension = filepath.Join(repo, dir, "syncledger.ts")
	if err := os.MkdirAll(filepath.Dir(out.Extension), 0o755); err != nil {
		return out, err
	}
	if err := writeFile(out.Extension, Extension(version)); err != nil {
		return out, err
	}
	for _, d := range movedDirs {
		from, to := filepath.Join(repo, ".swamp", d), filepath.Join(cfg.Cache, namespace, d)
		if _, err := os.Stat(from); err != nil {
			continue
		}
		if _, err := os.Stat(to); !errors.Is(err, fs.ErrNotExist) {
			continue // the cache has its own: keep the repo's where it is
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return out, err
		}
		if err := os.Rename(from, to); err != nil {
			return out, fmt.Errorf("move %s into the cache: %w", from, err)
		}
		out.Moved = append(out.Moved, d)
	}
	out.Config = yml
	return out, writeFile(yml, newYAML)
}

// RepoID returns the repoId of the swamp repo at repo (from .swamp.yaml).
func RepoID(repo string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	if err != nil {
		return "", err
	}
	var y struct {
		RepoID string `yaml:"repoId"`
	}
	if err := yaml.Unmarshal(raw, &y); err != nil || y.RepoID == "" {
		return "", fmt.Errorf("%s/.swamp.yaml has no repoId: is it a swamp repo?", repo)
	}
	return y.RepoID, nil
}

// SetupCommand is swamp's own command that configures the same datastore (it
// asks for a swamp-club login).
func SetupCommand(cfg ExtensionConfig, lazy bool, namespace string) string {
	j, _ := json.Marshal(cfg)
	cmd := "swamp datastore setup extension " + ExtensionType + " --config '" + string(j) + "'"
	if lazy {
		cmd += " --hydration-strategy lazy"
	}
	if namespace != "" {
		cmd += " --namespace " + namespace
	}
	return cmd
}

func mapGet(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
}

// writeFile replaces path with data atomically.
func writeFile(path string, data []byte) error {
	tmp := path + ".syncledger-tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
