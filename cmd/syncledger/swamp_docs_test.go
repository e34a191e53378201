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

// hole stands for a value in a rendered message of the extension.
const hole = "\x00"

// extensionMessages returns the lines the extension prints as patterns: each
// run of template literals joined by + whose text starts with ${TYPE}: (a
// message, or one of its lines chosen by a condition), ${TYPE} as the
// extension's type and every other ${…} a hole matching any text, split at
// \n; a line that is only a hole (a part chosen elsewhere) is left out.
func extensionMessages(t *testing.T) []*regexp.Regexp {
	t.Helper()
	src := string(swamp.Extension())
	group := regexp.MustCompile("`[^`]*`(?:\\s*\\+\\s*`[^`]*`)*")
	literal := regexp.MustCompile("`([^`]*)`")
	expr := regexp.MustCompile(`\$\{[^}]*\}`)
	var out []*regexp.Regexp
	for _, g := range group.FindAllString(src, -1) {
		var msg strings.Builder
		for _, m := range literal.FindAllStringSubmatch(g, -1) {
			msg.WriteString(m[1])
		}
		if !strings.HasPrefix(msg.String(), "${TYPE}: ") {
			continue
		}
		s := strings.ReplaceAll(msg.String(), "${TYPE}", swamp.ExtensionType)
		s = expr.ReplaceAllString(s, hole)
		for line := range strings.SplitSeq(s, `\n`) {
			if strings.Trim(line, hole) == "" {
				continue
			}
			out = append(out, regexp.MustCompile(`^`+strings.ReplaceAll(regexp.QuoteMeta(line), hole, `.+`)+`$`))
		}
	}
	if len(out) == 0 {
		t.Fatal("the extension prints no message starting with its type")
	}
	return out
}

// TestSwampDocumentedMessages (issue 39): every message docs/swamp.md shows
// the extension printing — not published at swamp's exit, a lost lock, the
// stale read, the offline run — is one the extension prints, word for word
// but for the values (TestSwampRealServerKilled, TestSwampRealOffline and the
// disk-full run match the real swamp's output against the same lines).
func TestSwampDocumentedMessages(t *testing.T) {
	t.Parallel()
	printed := extensionMessages(t)
	docs := documentedMessages(t)
	for _, d := range docs {
		found := false
		for _, p := range printed {
			found = found || p.MatchString(d.doc)
		}
		if !found {
			var ps []string
			for _, p := range printed {
				ps = append(ps, strings.ReplaceAll(p.String(), ".+", "…"))
			}
			t.Errorf("docs/swamp.md shows\n  %s\nwhich the extension never prints; it prints:\n  %s", d.doc, strings.Join(ps, "\n  "))
		}
	}
	for _, want := range []string{"were not published to the ledger", "may be stale", "offline (<why>): swamp runs", "offline (<why>): this command's changes stay"} {
		found := false
		for _, d := range docs {
			found = found || strings.Contains(d.doc, want)
		}
		if !found {
			t.Errorf("docs/swamp.md shows no message containing %q", want)
		}
	}
}

// matchesDocumented fails t unless out has a line containing each key, and
// every such line is one docs/swamp.md shows (its placeholders any value).
func matchesDocumented(t *testing.T, out string, keys ...string) {
	t.Helper()
	docs := documentedMessages(t)
	for _, key := range keys {
		n := 0
		for l := range strings.SplitSeq(out, "\n") {
			l = strings.TrimRight(l, "\r")
			if !strings.HasPrefix(l, swamp.ExtensionType+": ") || !strings.Contains(l, key) {
				continue
			}
			n++
			found := false
			for _, d := range docs {
				found = found || d.re.MatchString(l)
			}
			if !found {
				t.Errorf("swamp printed\n  %s\nwhich docs/swamp.md does not show", l)
			}
		}
		if n == 0 {
			t.Errorf("swamp printed no line of the extension with %q:\n%s", key, out)
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
