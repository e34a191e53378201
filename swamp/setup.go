package swamp

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
)

// ExtensionType is the datastore type the extension registers with swamp.
const ExtensionType = "@syncledger/datastore"

//go:embed extension/syncledger.ts
var extensionSource []byte

// Extension returns the extension's source, as setup writes it into a repo:
// the same bytes whichever binary writes it (it records no build), so every
// host's checkout holds the same file and a new release of the binary runs
// an extension an older one wrote, as long as they speak the same agent
// protocol (the hello request).
func Extension() []byte { return slices.Clone(extensionSource) }

// ExtensionConfig is the datastore's "config" in .swamp.yaml (configSchema
// in extension/syncledger.ts): what every host of the repo shares. It holds
// nothing per host and no secret; see HostConfig.
type ExtensionConfig struct {
	NATS      string `json:"nats,omitempty" yaml:"nats,omitempty"` // the server's URL, without credentials
	Ledger    string `json:"ledger" yaml:"ledger"`
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"` // the ledger is then the base (NamespaceLedger)
	LockTTLMs int64  `json:"lockTtlMs,omitempty" yaml:"lockTtlMs,omitempty"`
}

// HostFile is where a host keeps its own settings for a repo's datastore
// (HostConfig), relative to the repo: inside .swamp/, swamp's per-host
// runtime directory, which swamp's .gitignore section leaves out of git (as
// its vault keyfile, .swamp/secrets/keyfile).
const HostFile = ".swamp/syncledger-host.json"

// HostConfig is one host's settings for a repo's datastore, read by the
// extension from HostFile: each key, where set, overrides the datastore
// config's. Credentials are never here: the agent reads them as every
// syncledger command does (SYNCLEDGER_NATS_* in the environment swamp runs
// in, or the user's syncledger config file).
type HostConfig struct {
	Binary string   `json:"binary,omitempty"` // default: $SYNCLEDGER_BINARY, else syncledger on PATH
	Cache  string   `json:"cache,omitempty"`  // default: REPO/.swamp/syncledger-cache
	Host   string   `json:"host,omitempty"`   // default: as every command (SYNCLEDGER_HOST, the config file, the hostname)
	NATS   string   `json:"nats,omitempty"`   // this host's way to the server, if not the repo's
	Flags  []string `json:"flags,omitempty"`  // more global flags, e.g. --nats-creds FILE
	// Offline lets swamp run on the cache when the server cannot be reached
	// (the agent's --offline-ok).
	Offline bool `json:"offline,omitempty"`
}

// DefaultCache is a repo's syncledger cache when HostConfig names none.
func DefaultCache(repo string) string { return filepath.Join(repo, ".swamp", "syncledger-cache") }

// DatastoreDirs are the directories of a swamp datastore that an extension
// datastore holds: what swamp's own extension setup moves into the cache
// (reference §2). Others (secrets, bundles, telemetry, …) stay local.
var DatastoreDirs = []string{"definitions-evaluated", "workflows-evaluated", "data", "outputs", "workflow-runs", "audit"}

// Installed says what Install did.
type Installed struct {
	Extension string `json:"extension"`          // the file written
	Config    string `json:"config"`             // .swamp.yaml
	HostFile  string `json:"hostFile,omitempty"` // HostFile, if this host has settings of its own
}

// CheckRepo checks that repo is a swamp repo (it has .swamp.yaml), without
// writing anything.
func CheckRepo(repo string) error {
	if _, err := os.Stat(filepath.Join(repo, ".swamp.yaml")); err != nil {
		return fmt.Errorf("%s is not a swamp repo (no .swamp.yaml): run 'swamp repo init' there first", repo)
	}
	return nil
}

// Install writes the extension into repo, points the datastore of repo's
// .swamp.yaml at it with cfg (what `swamp datastore setup extension`
// writes; other keys are kept) and writes host to HostFile (removes it when
// host is empty), and removes swamp's data catalog of the old datastore.
// The extension and the datastore block are the same on every host for the
// same cfg and lazy.
func Install(repo string, cfg ExtensionConfig, host HostConfig, lazy bool) (Installed, error) {
	var out Installed
	yml := filepath.Join(repo, ".swamp.yaml")
	doc, root, err := readMarker(repo)
	if err != nil {
		return out, err
	}
	dir := "extensions/datastores"
	if d := mapGet(root, "datastoresDir"); d != nil && d.Value != "" {
		dir = d.Value
	}
	ds := map[string]any{"type": ExtensionType, "config": cfg}
	if lazy {
		ds["hydrationStrategy"] = "lazy"
	}
	if cfg.Namespace != "" {
		ds["namespace"] = cfg.Namespace
	}
	var node yaml.Node
	if err := node.Encode(ds); err != nil {
		return out, err
	}
	mapSet(root, "datastore", &node)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return out, err
	}
	out.Extension = filepath.Join(repo, dir, "syncledger.ts")
	if err := os.MkdirAll(filepath.Dir(out.Extension), 0o755); err != nil {
		return out, err
	}
	if err := writeFile(out.Extension, Extension()); err != nil {
		return out, err
	}
	hf := filepath.Join(repo, HostFile)
	if host.Binary == "" && host.Cache == "" && host.Host == "" && host.NATS == "" && len(host.Flags) == 0 && !host.Offline {
		if err := os.Remove(hf); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, err
		}
	} else {
		b, _ := json.MarshalIndent(host, "", "  ")
		if err := os.MkdirAll(filepath.Dir(hf), 0o755); err != nil {
			return out, err
		}
		if err := writeFile(hf, append(b, '\n')); err != nil {
			return out, err
		}
		out.HostFile = hf
	}
	out.Config = yml
	if err := writeFile(yml, buf.Bytes()); err != nil {
		return out, err
	}
	// swamp's data catalog, a read model of the datastore's files, is the
	// repo's own (.swamp/data/_catalog.db, never synced): the old datastore's
	// rows would outlive the switch. swamp rebuilds it from the files at its
	// next query when it is missing.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(repo, ".swamp", "data", "_catalog.db"+suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, fmt.Errorf("reset swamp's data catalog: %w", err)
		}
	}
	return out, nil
}

func readMarker(repo string) (*yaml.Node, *yaml.Node, error) {
	yml := filepath.Join(repo, ".swamp.yaml")
	raw, err := os.ReadFile(yml)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a swamp repo (no .swamp.yaml): run 'swamp repo init' there first", repo)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", yml, err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("read %s: not a mapping", yml)
	}
	return &doc, root, nil
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
func SetupCommand(cfg ExtensionConfig, lazy bool) string {
	j, _ := json.Marshal(cfg)
	cmd := "swamp datastore setup extension " + ExtensionType + " --config '" + string(j) + "'"
	if lazy {
		cmd += " --hydration-strategy lazy"
	}
	if cfg.Namespace != "" {
		cmd += " --namespace " + cfg.Namespace
	}
	return cmd
}

// Datastore is the datastore a repo's .swamp.yaml names (swamp's
// resolveDatastoreConfig, without SWAMP_DATASTORE): where its data is.
type Datastore struct {
	Type      string // "filesystem" (also when .swamp.yaml names none), ExtensionType, @swamp/s3-datastore, …
	Path      string // filesystem: the directory, absolute
	Namespace string
	// Source is the datastore as syncledger swamp import reads it: a file://,
	// s3:// or gs:// URL; "" for ExtensionType.
	Source string
	// Dirs, for a filesystem datastore, limits an import to DatastoreDirs.
	Dirs bool
}

// ReadDatastore reads the datastore block of repo's .swamp.yaml. A type
// syncledger cannot read is an error naming it.
func ReadDatastore(repo string) (Datastore, error) {
	raw, err := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	if err != nil {
		return Datastore{}, fmt.Errorf("%s is not a swamp repo (no .swamp.yaml): run 'swamp repo init' there first", repo)
	}
	var y struct {
		Datastore *struct {
			Type           string         `yaml:"type"`
			Path           string         `yaml:"path"`
			Namespace      string         `yaml:"namespace"`
			Config         map[string]any `yaml:"config"`
			Bucket         string         `yaml:"bucket"` // the legacy "s3" type's fields
			Prefix         string         `yaml:"prefix"`
			Region         string         `yaml:"region"`
			Endpoint       string         `yaml:"endpoint"`
			ForcePathStyle bool           `yaml:"forcePathStyle"`
		} `yaml:"datastore"`
	}
	if err := yaml.Unmarshal(raw, &y); err != nil {
		return Datastore{}, fmt.Errorf("read %s/.swamp.yaml: %w", repo, err)
	}
	d := y.Datastore
	if d == nil {
		p := filepath.Join(repo, ".swamp")
		return Datastore{Type: "filesystem", Path: p, Source: fileURL(p), Dirs: true}, nil
	}
	out := Datastore{Type: d.Type, Namespace: d.Namespace}
	str := func(k string) string { s, _ := d.Config[k].(string); return s }
	switch d.Type {
	case "filesystem":
		p, err := expandEnv(d.Path)
		if err != nil {
			return out, fmt.Errorf("the filesystem datastore's path in %s/.swamp.yaml: %w", repo, err)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(repo, p)
		}
		out.Path, out.Source, out.Dirs = filepath.Clean(p), fileURL(p), true
	case ExtensionType:
	case "s3":
		out.Type = "@swamp/s3-datastore"
		out.Source = s3URL(d.Bucket, d.Prefix, d.Region, d.Endpoint, d.ForcePathStyle)
	case "@swamp/s3-datastore":
		fps, _ := d.Config["forcePathStyle"].(bool)
		out.Source = s3URL(str("bucket"), str("prefix"), str("region"), str("endpoint"), fps)
	case "@swamp/gcs-datastore":
		out.Source = (&url.URL{Scheme: "gs", Host: str("bucket"), Path: "/" + strings.Trim(str("prefix"), "/")}).String()
	default:
		return out, fmt.Errorf("the datastore of %s/.swamp.yaml is %s, which syncledger cannot read", repo, d.Type)
	}
	return out, nil
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

func s3URL(bucket, prefix, region, endpoint string, pathStyle bool) string {
	q := url.Values{}
	if region != "" {
		q.Set("region", region)
	}
	if endpoint != "" {
		q.Set("endpoint", endpoint)
	}
	if pathStyle {
		q.Set("path-style", "true")
	}
	u := url.URL{Scheme: "s3", Host: bucket, Path: "/" + strings.Trim(prefix, "/"), RawQuery: q.Encode()}
	return u.String()
}

// envRef is swamp's pattern of a path's references (env_path.ts): ~ at the
// start, ${VAR} and $VAR.
var envRef = regexp.MustCompile(`^~(/|$)|\$\{([a-zA-Z_][a-zA-Z0-9_]*)\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

// expandEnv expands a filesystem datastore's path as swamp does: an unset
// or empty variable is an error.
func expandEnv(p string) (string, error) {
	var err error
	out := envRef.ReplaceAllStringFunc(p, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		name := sub[2] + sub[3]
		if name == "" { // ~
			name = "HOME"
		}
		v := os.Getenv(name)
		if v == "" && err == nil {
			err = fmt.Errorf("environment variable %q is not set or empty (referenced in %q)", name, p)
		}
		if sub[1] != "" || m == "~" {
			return v + sub[1]
		}
		return v
	})
	return out, err
}

// OnlyDatastoreDirs returns objs seen as a filesystem datastore (keys under
// prefix, "" or "NS/"): only files under DatastoreDirs are listed or read —
// never swamp's local-only directories (secrets, bundles, …) or databases.
func OnlyDatastoreDirs(objs *ledger.Bucket, prefix string) *ledger.Bucket {
	return objs.View(func(d driver.Bucket) driver.Bucket { return dirsStore{d, prefix} })
}

// dirsStore is the view of OnlyDatastoreDirs on a bucket's driver.
type dirsStore struct {
	driver.Bucket
	prefix string
}

// errOutside is the answer for a key outside the datastore's directories.
var errOutside = errors.New("not in a datastore directory")

func (s dirsStore) ok(key string) bool {
	rel, found := strings.CutPrefix(key, s.prefix)
	dir, _, _ := strings.Cut(rel, "/")
	return found && slices.Contains(DatastoreDirs, dir)
}

func (s dirsStore) ErrorCode(err error) driver.ErrorCode {
	if errors.Is(err, errOutside) {
		return driver.NotFound
	}
	return s.Bucket.ErrorCode(err)
}

func (s dirsStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if !s.ok(key) {
		return nil, errOutside
	}
	return s.Bucket.Get(ctx, key)
}

func (s dirsStore) Stat(ctx context.Context, key string) (driver.ObjectInfo, error) {
	if !s.ok(key) {
		return driver.ObjectInfo{}, errOutside
	}
	return s.Bucket.Stat(ctx, key)
}

func (s dirsStore) List(ctx context.Context, prefix string, fn func(driver.ObjectInfo) error) error {
	return s.Bucket.List(ctx, prefix, func(o driver.ObjectInfo) error {
		if !s.ok(o.Key) {
			return nil
		}
		return fn(o)
	})
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

// RepoDatastore is what a repo set up on a ledger says of its datastore: the
// datastore config of .swamp.yaml (ExtensionConfig) and this host's own
// settings (HostFile), for a syncledger command run inside the repo.
type RepoDatastore struct {
	Repo   string
	Config ExtensionConfig
	Host   HostConfig
}

// Cache is the syncledger cache of the repo's datastore on this host: the
// host file's, else DefaultCache; a namespace's files are under NS/ of it.
func (r RepoDatastore) Cache() string {
	c := r.Host.Cache
	if c == "" {
		c = DefaultCache(r.Repo)
	} else if !filepath.IsAbs(c) {
		c = filepath.Join(r.Repo, c)
	}
	if r.Config.Namespace != "" {
		c = filepath.Join(c, r.Config.Namespace)
	}
	return c
}

// Ledger is the ledger the repo's cache syncs with: the config's, or its
// namespace's (NamespaceLedger).
func (r RepoDatastore) Ledger() (string, error) {
	if r.Config.Namespace == "" {
		return r.Config.Ledger, nil
	}
	return NamespaceLedger(r.Config.Ledger, r.Config.Namespace)
}

// NATS is the server's URL for this host: the host file's, else the config's.
func (r RepoDatastore) NATS() string {
	if r.Host.NATS != "" {
		return r.Host.NATS
	}
	return r.Config.NATS
}

// FindRepo walks up from dir to the nearest swamp repo (a directory holding
// .swamp.yaml) whose datastore is this extension's, and reads its settings.
// A repo on another datastore, or none, is not found (ok false); a repo whose
// settings do not read is an error naming the file.
func FindRepo(dir string) (RepoDatastore, bool, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".swamp.yaml")); err == nil {
			return readRepo(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return RepoDatastore{}, false, nil
		}
		dir = parent
	}
}

func readRepo(repo string) (RepoDatastore, bool, error) {
	raw, err := os.ReadFile(filepath.Join(repo, ".swamp.yaml"))
	if err != nil {
		return RepoDatastore{}, false, err
	}
	var y struct {
		Datastore *struct {
			Type      string          `yaml:"type"`
			Namespace string          `yaml:"namespace"`
			Config    ExtensionConfig `yaml:"config"`
		} `yaml:"datastore"`
	}
	if err := yaml.Unmarshal(raw, &y); err != nil {
		return RepoDatastore{}, false, fmt.Errorf("read %s/.swamp.yaml: %w", repo, err)
	}
	if y.Datastore == nil || y.Datastore.Type != ExtensionType {
		return RepoDatastore{}, false, nil
	}
	r := RepoDatastore{Repo: repo, Config: y.Datastore.Config}
	if r.Config.Namespace == "" {
		r.Config.Namespace = y.Datastore.Namespace
	}
	b, err := os.ReadFile(filepath.Join(repo, HostFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return r, false, err
	default:
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r.Host); err != nil {
			return r, false, fmt.Errorf("read %s: %w (fix it, or run 'syncledger swamp setup --repo %s' to rewrite it)", filepath.Join(repo, HostFile), err, repo)
		}
	}
	return r, true, nil
}
