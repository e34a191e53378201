package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/swamp"
	"github.com/syncledger/syncledger/swamp/agent"
)

// documentedMessage is a line docs/swamp.md shows the extension printing (an
// indented block line starting "@syncledger/datastore:"), as a pattern: its
// placeholders <why>, CACHE and HWM match any text.
type documentedMessage struct {
	doc string
	re  *regexp.Regexp
}

// documentedMessages returns docs/swamp.md's extension messages.
func documentedMessages(t *testing.T) []documentedMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "swamp.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []documentedMessage
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "    ") {
			continue // not a block: messages named inside a table or a sentence are excerpts
		}
		doc := strings.TrimSpace(line)
		if !strings.HasPrefix(doc, swamp.ExtensionType+": ") {
			continue
		}
		q := regexp.QuoteMeta(doc)
		for _, ph := range []string{"<why>", "CACHE", "HWM"} {
			q = strings.ReplaceAll(q, regexp.QuoteMeta(ph), `.+`)
		}
		out = append(out, documentedMessage{doc, regexp.MustCompile(`^` + q + `$`)})
	}
	if len(out) == 0 {
		t.Fatal("docs/swamp.md shows no message of the extension")
	}
	return out
}

// extensionMessages renders the lines the extension writes with
// console.error: its template literals joined, ${TYPE} as the extension's
// type and every other ${…} as X, split at \n.
func extensionMessages(t *testing.T) []string {
	t.Helper()
	src := string(swamp.Extension())
	literal := regexp.MustCompile("`([^`]*)`")
	expr := regexp.MustCompile(`\$\{[^}]*\}`)
	var out []string
	for _, part := range strings.Split(src, "console.error(")[1:] {
		end := strings.Index(part, ");\n")
		if end < 0 {
			t.Fatalf("a console.error( without its end:\n%.200s", part)
		}
		var msg strings.Builder
		for _, m := range literal.FindAllStringSubmatch(part[:end], -1) {
			msg.WriteString(m[1])
		}
		s := strings.ReplaceAll(msg.String(), "${TYPE}", swamp.ExtensionType)
		s = expr.ReplaceAllString(s, "X")
		out = append(out, strings.Split(s, `\n`)...)
	}
	return out
}

// TestSwampDocumentedMessages (issue 39): every message docs/swamp.md shows
// the extension printing — the not-published one at swamp's exit, the stale
// read, the offline run — is one the extension prints, word for word but
// for the values (TestSwampRealServerKilled and TestSwampRealOffline match
// the real swamp's output against the same lines).
func TestSwampDocumentedMessages(t *testing.T) {
	t.Parallel()
	printed := extensionMessages(t)
	for _, d := range documentedMessages(t) {
		found := false
		for _, p := range printed {
			found = found || d.re.MatchString(p)
		}
		if !found {
			t.Errorf("docs/swamp.md shows\n  %s\nwhich the extension never prints; it prints:\n  %s", d.doc, strings.Join(printed, "\n  "))
		}
	}
	for _, want := range []string{"were not published to the ledger", "may be stale", "offline (<why>): swamp runs", "offline (<why>): this command's changes stay"} {
		found := false
		for _, d := range documentedMessages(t) {
			found = found || strings.Contains(d.doc, want)
		}
		if !found {
			t.Errorf("docs/swamp.md shows no message containing %q", want)
		}
	}
}

// matchesDocumented fails t unless every documented message containing key
// is one of out's lines.
func matchesDocumented(t *testing.T, out string, keys ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for _, key := range keys {
		n := 0
		for _, d := range documentedMessages(t) {
			if !strings.Contains(d.doc, key) {
				continue
			}
			n++
			found := false
			for _, l := range lines {
				found = found || d.re.MatchString(strings.TrimRight(l, "\r"))
			}
			if !found {
				t.Errorf("swamp did not print the message docs/swamp.md shows:\n  %s\nit printed:\n%s", d.doc, out)
			}
		}
		if n == 0 {
			t.Errorf("docs/swamp.md shows no message containing %q", key)
		}
	}
}

// TestSwampDocumentedLockTTL (issue 39): the default lock TTL docs/swamp.md
// states is the agent's and the extension's, and setup's flag says the same.
func TestSwampDocumentedLockTTL(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "swamp.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`A lock's TTL is (\d+) s\*\* unless the repo sets one`).FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/swamp.md does not state the default lock TTL")
	}
	if want := fmt.Sprint(int(agent.DefaultLockTTL / time.Second)); string(m[1]) != want {
		t.Errorf("docs/swamp.md says the default lock TTL is %s s; the agent's is %s s", m[1], want)
	}
	ms := agent.DefaultLockTTL.Milliseconds()
	if !strings.Contains(string(swamp.Extension()), fmt.Sprintf("this.cfg.lockTtlMs ?? %d,", ms)) {
		t.Errorf("the extension's default lock TTL is not %d ms", ms)
	}
	r := cli(t, cliEnv(), "swamp", "setup", "--help")
	if !strings.Contains(r.stdout, fmt.Sprintf("(default %d)", ms)) {
		t.Errorf("swamp setup --help does not give the default lock TTL %d ms:\n%s", ms, r.stdout)
	}
}
