package main

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

// TestSwampRealBlobStoreHangs (issue 39 point 4, through the real swamp CLI):
// the blob store (S3) accepts connections and never answers while host a
// runs a model. swamp's output says, within seconds, what the push waits for
// ("@syncledger/datastore: prepare: waiting for the blob store (s3://…)"),
// and the run fails within a stated bound — the push's --wait
// (SYNCLEDGER_WAIT) and, at swamp's exit, the publish of what swamp wrote
// after it, each bounded the same — saying that the run was not published
// and what happens next; before, `syncledger commit` waited 400 s and more
// with no output. The store answers again: a's next command publishes the
// run, and both hosts agree.
func TestSwampRealBlobStoreHangs(t *testing.T) {
	const wait = 6 * time.Second
	w := newRealSwampWorld(t)
	srv, _ := natsjstest.RunServer(t)
	w.srv = srv
	hang, s3, blobs := hangingS3(t)
	w.start(srv.ClientURL(), s3Env...)
	w.swampEnv = append(slices.Clone(s3Env), "SYNCLEDGER_WAIT="+wait.String())
	w.c.ok("init", "--blobs", blobs)
	a, b := w.repo("host-a"), w.repo("host-b")
	w.mustSwamp(a, "model", "method", "run", "vpc", "execute")

	hang.Set(true)
	start := time.Now()
	out, code := w.run(a, "model", "method", "run", "vpc", "execute")
	took := time.Since(start)
	hang.Set(false)
	t.Logf("a's run with the blob store hanging: exit %d after %v:\n%s", code, took, syncledgerLines(out))
	if code == 0 {
		t.Fatal("a's run exited 0 although its push could not store its content")
	}
	// swamp's push is two-phase: its preparePush stores the content.
	if !regexp.MustCompile(`@syncledger/datastore: (prepare|commit): waiting for the blob store \(s3://ledger/blobs\?endpoint=` +
		regexp.QuoteMeta(s3) + `[^)]*\) to store content: no answer for [0-9.]+s`).MatchString(out) {
		t.Errorf("a's failed run does not say what its push waits for")
	}
	for _, want := range []string{
		"giving up after " + wait.String(),
		"gave up after waiting", "see that the blob store is up and reachable",
		"this command's changes were not published", "the next swamp command publishes them",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("a's failed run does not say %q", want)
		}
	}
	// The push gives up after wait; at swamp's exit the agent tries once more
	// to publish what swamp wrote after it, bounded the same. The rest is
	// swamp's own run.
	if limit := 2*wait + 30*time.Second; took > limit {
		t.Errorf("a's failed run took %v, want at most %v", took, limit)
	}
	if st := w.status(a); len(st.Dirty) == 0 {
		t.Errorf("a's run is not kept in its cache, uncommitted (dirty %q)", st.Dirty)
	}

	// The store answers again: a's next command publishes the run; b sees it.
	w.mustSwamp(a, "model", "method", "run", "other", "execute")
	w.mustSwamp(b, "datastore", "sync")
	w.synced(a, b)
	for _, r := range []string{a, b} {
		if v := w.dataVersions(r, "vpc"); v["result"] != 2 {
			t.Errorf("%s: vpc's result at version %d, want 2 (a's run that waited, published by its next command)", filepath.Base(r), v["result"])
		}
	}
}
