package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The parts of a compose file the checks below read. yaml.v3 resolves the
// anchors and merge keys (<<: *nats) the file uses.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   dependsOn         `yaml:"depends_on"`
}

// dependsOn is compose's depends_on in either form: a list of names or a map of
// name to condition.
type dependsOn []string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	var list []string
	if err := n.Decode(&list); err == nil {
		*d = list
		return nil
	}
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	for k := range m {
		*d = append(*d, k)
	}
	return nil
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// confVars returns the $VARIABLES a NATS config file and its includes read from
// the environment.
func confVars(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if inc, ok := strings.CutPrefix(strings.TrimSpace(line), "include "); ok {
			vars = append(vars, confVars(t, filepath.Join(filepath.Dir(path), strings.Trim(strings.TrimSpace(inc), `"'`)))...)
			continue
		}
		for _, m := range regexp.MustCompile(`\$([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(line, -1) {
			vars = append(vars, m[1])
		}
	}
	slices.Sort(vars)
	return slices.Compact(vars)
}

func TestComposeNATSCluster(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"n1", "n2", "n3"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		// nats:2.12 or later (atomic batches need server 2.12).
		m := regexp.MustCompile(`^nats:(\d+)\.(\d+)`).FindStringSubmatch(s.Image)
		if m == nil {
			t.Errorf("%s: image %q is not a versioned nats image", name, s.Image)
		} else if major, _ := strconv.Atoi(m[1]); major < 2 || major == 2 && atoi(m[2]) < 12 {
			t.Errorf("%s: image %q older than nats 2.12", name, s.Image)
		}
		// The config file in the command is the repository's, mounted.
		conf := "/etc/nats/" + name + ".conf"
		if !slices.Equal(s.Command, []string{"--config", conf}) {
			t.Errorf("%s: command %q, want --config %s", name, s.Command, conf)
		}
		hostDir := mountSource(s.Volumes, "/etc/nats")
		if hostDir == "" {
			t.Fatalf("%s: /etc/nats not mounted", name)
		}
		local := filepath.Join("..", hostDir, name+".conf")
		if _, err := os.Stat(local); err != nil {
			t.Errorf("%s: mounted config %s: %v", name, local, err)
		}
		// Every variable the config reads is set by compose (nats-server fails
		// on an undefined one).
		for _, v := range confVars(t, local) {
			if s.Environment[v] == "" {
				t.Errorf("%s: %s reads $%s, which compose does not set", name, local, v)
			}
		}
		if routes := s.Environment["NATS_ROUTES"]; !strings.Contains(routes, "nats://n1:6222") ||
			!strings.Contains(routes, "nats://n2:6222") || !strings.Contains(routes, "nats://n3:6222") {
			t.Errorf("%s: NATS_ROUTES %q does not route to all three nodes", name, routes)
		}
		if mountSource(s.Volumes, "/data") == "" || s.Environment["NATS_STORE_DIR"] != "/data" {
			t.Errorf("%s: JetStream store is not a volume at /data", name)
		}
		checkLoopbackPorts(t, name, s)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// mountSource returns the host side of the volume mounted at target.
func mountSource(volumes []string, target string) string {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return parts[0]
		}
	}
	return ""
}

// checkLoopbackPorts: nothing is published beyond the host's loopback (the
// cluster and the stores have no authentication).
func checkLoopbackPorts(t *testing.T, name string, s composeService) {
	t.Helper()
	for _, p := range s.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("%s: port %q published beyond loopback", name, p)
		}
	}
}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"minio", "fake-gcs", "ledger-init", "host-a", "host-b"} {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		checkLoopbackPorts(t, name, s)
	}
	for name, s := range c.Services {
		for _, dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
			}
		}
		for _, v := range s.Volumes {
			src := strings.Split(v, ":")[0]
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("%s: mounted %s: %v", name, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s: volume %s not declared", name, src)
			}
		}
	}
	if _, err := os.Stat("../Dockerfile"); err != nil {
		t.Errorf("Dockerfile: %v", err)
	}
	for _, name := range []string{"host-a", "host-b"} {
		s := c.Services[name]
		if s.Build == nil {
			t.Errorf("%s: not built from the repository", name)
		}
		for _, v := range []string{"SYNCLEDGER_NATS", "SYNCLEDGER_HOST", "SYNCLEDGER_CACHE"} {
			if s.Environment[v] == "" {
				t.Errorf("%s: %s unset", name, v)
			}
		}
		if !strings.Contains(s.Environment["SYNCLEDGER_NATS"], "n2:4222") {
			t.Errorf("%s: SYNCLEDGER_NATS %q does not list the cluster's nodes", name, s.Environment["SYNCLEDGER_NATS"])
		}
		if mountSource(s.Volumes, s.Environment["SYNCLEDGER_CACHE"]) == "" {
			t.Errorf("%s: cache %s is not a volume", name, s.Environment["SYNCLEDGER_CACHE"])
		}
	}
	init := c.Services["ledger-init"]
	if cmd := strings.Join(init.Command, " "); !strings.Contains(cmd, "--replicas 3") || !strings.Contains(cmd, "s3://") || !strings.Contains(cmd, "gs://") {
		t.Errorf("ledger-init does not create R3 ledgers on MinIO and fake-gcs-server: %q", cmd)
	}
}
