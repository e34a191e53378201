// Command tsgen rewrites the @syncledger/datastore extension's protocol
// block from the agent's protocol (agent.GenerateTypeScript). It runs from
// `go generate ./swamp/agent`, in that package's directory;
// TestProtocolTypeScript fails when the block is stale.
package main

import (
	"fmt"
	"os"

	"github.com/syncledger/syncledger/swamp/agent"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "tsgen: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	src, err := os.ReadFile(agent.ExtensionFile)
	if err != nil {
		return fmt.Errorf("%w (run it in swamp/agent: go generate ./swamp/agent)", err)
	}
	out, err := agent.GenerateTypeScript(src)
	if err != nil {
		return err
	}
	return os.WriteFile(agent.ExtensionFile, out, 0o644)
}
