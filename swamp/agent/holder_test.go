package agent

import (
	"os/user"
	"strings"
	"testing"
)

// TestLockNamesHost: a lock the agent takes names this host's syncledger id
// (LockInfo.Host) beside swamp's USER@MACHINE, and a person where swamp knew
// none (no USER: "swamp@vm"); its waiting messages say "host ID" (issue 39:
// they named the machine alone).
func TestLockNamesHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := serveAgent(t, Config{Host: "ci-3", Ports: ports{e: e, cache: t.TempDir()}})
	holder := map[string]any{"holder": "swamp@vm", "hostname": "vm", "pid": 7, "nonce": "n1"}
	if r := c.call(map[string]any{"op": "lock.acquire", "key": ".datastore.lock", "holder": holder, "maxWaitMs": 1000}); r.Error != nil {
		t.Fatalf("acquire: %+v", r.Error)
	}
	r := c.call(map[string]any{"op": "lock.inspect", "key": ".datastore.lock"})
	info, _ := r.Result.(map[string]any)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if info["host"] != "ci-3" || info["hostname"] != "vm" || info["holder"] != me.Username+"@vm" {
		t.Fatalf("inspect: %+v; want holder %s@vm, host ci-3, hostname vm", info, me.Username)
	}
	li := LockInfo{Holder: "alice@vm", Hostname: "vm", PID: 7, Host: "ci-3", HeldSince: "T"}
	if got := li.String(); got != "alice@vm (host ci-3, pid 7) since T" {
		t.Errorf("String() = %q", got)
	}
	li.Host = "" // an older agent's lock
	if got := li.String(); !strings.Contains(got, "(host vm, pid 7)") {
		t.Errorf("String() of a lock without a host id = %q", got)
	}
	for in, want := range map[string]string{"alice@vm": "alice@vm", "unknown@vm": me.Username + "@vm", "@vm": me.Username + "@vm"} {
		if got := holderName(in, "vm"); got != want {
			t.Errorf("holderName(%q) = %q, want %q", in, got, want)
		}
	}
}
