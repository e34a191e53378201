package agent

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentEndPublishes: with no close (swamp killed, or no close pipes), what
// swamp wrote since its last push is published when the agent's input ends;
// after a close with publish false (a push failed), nothing is.
func TestAgentEndPublishes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		close bool
	}{{"no close", false}, {"close without publish", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cache := t.TempDir()
			a, err := New(Config{Version: "v-test", Cache: cache, Ports: ports{e: e, cache: cache}, WaysOut: waysOut{}})
			if err != nil {
				t.Fatal(err)
			}
			write(t, cache, "outputs/t/m/run.yaml", "done\n")
			lines := `{"op":"hint","hints":["outputs/t/m/run.yaml"]}` + "\n"
			if tc.close {
				lines += `{"id":1,"op":"close","publish":false}` + "\n"
			}
			if err := a.Serve(testCtx(t), strings.NewReader(lines), io.Discard); err != nil {
				t.Fatal(err)
			}
			head, _ := e.log.LastSeq(t.Context())
			if published := head > 0; published == tc.close {
				t.Fatalf("head %d after the agent's end", head)
			}
		})
	}
}

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
