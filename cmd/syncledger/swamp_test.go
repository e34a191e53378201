package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
	"github.com/syncledger/syncledger/swamp/index"
)

// swampRun runs one command line in-process with env, and returns its exit
// code and output. extra subcommands are added under their parent first (for
// commands not yet registered).
func swampRun(t *testing.T, env map[string]string, extra map[string]func(*app) *cobra.Command, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	a := newApp(&stdout, &stderr, func(k string) string { return env[k] })
	defer a.close()
	root := newRootCmd(a)
	for parent, mk := range extra {
		for _, c := range root.Commands() {
			if c.Name() == parent {
				c.AddCommand(mk(a))
			}
		}
	}
	root.SetArgs(args)
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && !silent(err) {
		stderr.WriteString("syncledger: " + err.Error() + "\n")
	}
	return exitCode(err), stdout.String(), stderr.String()
}

func swampFixture(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "swamp", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestSwampImportMirrorCLI(t *testing.T) {
	t.Parallel()
	srv, _ := natsjstest.RunServer(t)
	env := map[string]string{"SYNCLEDGER_NATS": srv.ClientURL(), "SYNCLEDGER_LEDGER": "swampcli",
		"SYNCLEDGER_HOST": "test", "SYNCLEDGER_LOG_LEVEL": "warn"}
	if code, _, stderr := swampRun(t, env, nil, "init", "--blobs", "file://"+t.TempDir()); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	code, stdout, stderr := swampRun(t, env, nil, "swamp", "import", "--from", "file://"+swampFixture(t, "v2"))
	if code != 0 || !strings.Contains(stdout, "partitions: 9 (9 committed, 0 already in the ledger, 0 conflicts)") ||
		!strings.Contains(stdout, "skipped internal files: 1") || !strings.Contains(stderr, "[9/9]") {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = swampRun(t, env, nil, "swamp", "import", "--from", "file://"+swampFixture(t, "v2"))
	if code != 0 || !strings.Contains(stdout, "partitions: 9 (0 committed, 9 already in the ledger") {
		t.Fatalf("second import: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = swampRun(t, env, nil, "swamp", "import", "--from", "file://"+swampFixture(t, "mismatch"), "--json")
	if code != exitSwampFindings || !strings.Contains(stdout, `"mismatches":[{"path":"audit/bad.jsonl"`) {
		t.Fatalf("mismatch import: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := swampRun(t, env, nil, "swamp", "import"); code != exitUsage {
		t.Fatalf("import without --from: exit %d %s", code, stderr)
	}

	// consume swamp-mirror, registered under consume the way it will be.
	target := t.TempDir()
	extra := map[string]func(*app) *cobra.Command{"consume": newConsumeSwampMirrorCmd}
	code, stdout, stderr = swampRun(t, env, extra, "consume", "swamp-mirror", "--to", "file://"+target, "--once")
	if code != 0 || !strings.Contains(stdout, "mirrored 10 commits") {
		t.Fatalf("mirror: exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(target, "_index", "_meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := index.ParseMeta(b)
	if err != nil || meta.CommitSeq != 10 || len(meta.Partitions) != 9 {
		t.Fatalf("mirrored meta %+v, %v", meta, err)
	}
}

func TestSwampDoctorCLI(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SYNCLEDGER_CACHE": "/nonexistent", "SYNCLEDGER_HOST": "test"}
	remote := "file://" + swampFixture(t, "doctor/remote")
	cache := copyTree(t, swampFixture(t, "doctor/cache-3193"))
	code, stdout, stderr := swampRun(t, env, nil, "swamp", "doctor", "--cache", cache, "--from", remote)
	if code != exitSwampFindings || !strings.Contains(stdout, "state: ARMED (swamp-club#3193)") || !strings.Contains(stdout, "missing: 3") {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, stdout, stderr)
	}
	backups := t.TempDir()
	code, stdout, stderr = swampRun(t, env, nil, "swamp", "doctor", "--cache", cache, "--from", remote, "--repair", "--backup-dir", backups)
	if code != 0 || !strings.Contains(stdout, "commitSeq: 2 → (removed)") || !strings.Contains(stdout, "backup of the old sidecar: "+backups) {
		t.Fatalf("doctor --repair: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = swampRun(t, env, nil, "swamp", "doctor", "--cache", swampFixture(t, "doctor/cache-healthy"), "--from", remote)
	if code != 0 || !strings.Contains(stdout, "state: healthy") {
		t.Fatalf("healthy: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := swampRun(t, env, nil, "swamp", "doctor", "--from", remote); code != exitUsage {
		t.Fatalf("doctor without --cache: exit %d %s", code, stderr)
	}
}
