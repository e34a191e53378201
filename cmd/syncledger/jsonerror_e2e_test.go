package main

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// jsonCommands returns the path of every command that takes --json.
func jsonCommands() []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil {
			out = append(out, strings.TrimPrefix(c.CommandPath(), "syncledger "))
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd(newApp(io.Discard, io.Discard, func(string) string { return "" })))
	return out
}

// checkErrorJSON checks that a failed --json command printed exactly one error
// object on stdout, with every field, and the exit code it exited with.
func checkErrorJSON(t *testing.T, args []string, r result) errorObject {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("%v: exit 0, want a failure\nstdout: %s", args, r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("%v: stdout is %d lines, want one error object:\n%s", args, len(lines), r.stdout)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[0]), &raw); err != nil || len(raw) != 1 || raw["error"] == nil {
		t.Fatalf("%v: stdout is not a single {\"error\": …} object (%v):\n%s", args, err, r.stdout)
	}
	for _, k := range []string{"code", "kind", "message", "paths", "commands"} {
		if _, ok := raw["error"][k]; !ok {
			t.Fatalf("%v: error object has no %q:\n%s", args, k, r.stdout)
		}
	}
	var o errorReport
	if err := json.Unmarshal([]byte(lines[0]), &o); err != nil {
		t.Fatal(err)
	}
	e := o.Error
	if e.Code != r.code || e.Kind == "" || e.Message == "" || e.Paths == nil || e.Commands == nil {
		t.Fatalf("%v (exit %d): error object %+v", args, r.code, e)
	}
	if !strings.Contains(r.stderr, "syncledger: "+e.Message) {
		t.Fatalf("%v: stderr does not carry the message %q:\n%s", args, e.Message, r.stderr)
	}
	return e
}

// Every command that takes --json prints, when it fails, one
// {"error":{code,kind,message,paths,commands,detail}} object on stdout and
// never a result (#14 point 8).
func TestJSONErrorEveryCommand(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	// A ledger server that is not there: every command that needs it fails.
	env := cliEnv("SYNCLEDGER_NATS=nats://127.0.0.1:1", "SYNCLEDGER_LEDGER=jsonerr", "SYNCLEDGER_LOG_LEVEL=error")
	cases := map[string][]string{
		"backup":               {"backup", "--json", t.TempDir() + "/b"},
		"commit":               {"--cache", cache, "commit", "--json"},
		"config permissions":   {"config", "permissions", "--json", "--no-such-flag"},
		"config show":          {"--log-level", "loud", "config", "show", "--json"},
		"consume dead-letters": {"consume", "dead-letters", "--json"},
		"consume status":       {"consume", "status", "--json"},
		"fetch":                {"--cache", cache, "fetch", "--json", "x"},
		"gc":                   {"gc", "--json"},
		"hosts":                {"hosts", "--json"},
		"log":                  {"log", "--json"},
		"mirror create":        {"--read-nats", "nats://127.0.0.1:1", "mirror", "create", "--json"},
		"mirror status":        {"--read-nats", "nats://127.0.0.1:1", "mirror", "status", "--json"},
		"mirror promote":       {"mirror", "promote", "--json"},
		"quarantine":           {"quarantine", "7", "--reason", "bad", "--json"},
		"rebuild":              {"--cache", cache, "rebuild", "--json"},
		"replay":               {"replay", "--json", "--to", "1", "--into", t.TempDir()},
		"resolve":              {"--cache", cache, "resolve", "--json", "--theirs", "x"},
		"restore":              {"restore", "--json", t.TempDir()},
		"serve":                {"serve", "--listen", "0.0.0.0:0", "--data", t.TempDir(), "--json"},
		"snapshot":             {"snapshot", "--json"},
		"status":               {"--cache", t.TempDir(), "status", "--json"},
		"swamp doctor":         {"swamp", "doctor", "--json"},
		"swamp import":         {"swamp", "import", "--json"},
		"swamp setup":          {"swamp", "setup", "--json"},
		"sync":                 {"--cache", cache, "sync", "--json"},
		"tail":                 {"tail", "--json"},
		"ui":                   {"ui", "--listen", "0.0.0.0:0", "--json"},
		"upgrade":              {"upgrade", "--json"},
		"verify":               {"--cache", t.TempDir(), "verify", "--json"},
		"watch":                {"--cache", cache, "watch", "--json"},
	}
	for _, name := range jsonCommands() {
		args, ok := cases[name]
		if !ok {
			t.Errorf("%s takes --json: add a failing case for it here", name)
			continue
		}
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			e := checkErrorJSON(t, args, cli(t, env, args...))
			t.Logf("exit %d, %s: %s", e.Code, e.Kind, e.Message)
		})
	}
	for name := range cases {
		if !slices.Contains(jsonCommands(), name) {
			t.Errorf("case %q: no such command with --json", name)
		}
	}
}

// The two cases of #14 point 8, against a real server: commit --json losing to
// a remote change (exit 3) and sync --json stopping on local changes print the
// error object naming the paths, not a result with wrong numbers.
func TestJSONErrorConflictCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t, "jsonconflict")
	c.ok("init", "--blobs", "file://"+t.TempDir())
	a, b := t.TempDir(), t.TempDir()
	put(t, a, "audit/shared", "a1")
	c.ok("--cache", a, "--host", "a", "commit")
	c.ok("--cache", b, "--host", "b", "sync")
	put(t, a, "audit/shared", "a2")
	c.ok("--cache", a, "--host", "a", "commit")
	put(t, b, "audit/shared", "b2")

	args := []string{"--cache", b, "--host", "b", "commit", "--json"}
	e := checkErrorJSON(t, args, c.run(args...))
	if e.Code != exitConflict || e.Kind != "conflict" || !slices.Equal(e.Paths, []string{"audit/shared"}) {
		t.Fatalf("commit --json conflict: %+v", e)
	}
	args = []string{"--cache", b, "--host", "b", "sync", "--json"}
	e = checkErrorJSON(t, args, c.run(args...))
	if e.Code != exitConflict || e.Kind != "local-changes" || !slices.Equal(e.Paths, []string{"audit/shared"}) || len(e.Commands) == 0 {
		t.Fatalf("sync --json on local changes: %+v", e)
	}
}
