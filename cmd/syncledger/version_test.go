package main

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/syncledger/syncledger/embedded"
)

// TestNATSServerVersion: the version and --listen default the default build
// states without linking nats-server are the embedded server's.
func TestNATSServerVersion(t *testing.T) {
	if natsServerVersion != server.VERSION {
		t.Errorf("natsServerVersion = %q, the linked nats-server is %q: update version.go", natsServerVersion, server.VERSION)
	}
	if defaultListen != embedded.DefaultListen {
		t.Errorf("defaultListen = %q, embedded.DefaultListen = %q", defaultListen, embedded.DefaultListen)
	}
}
