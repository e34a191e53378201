package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/spf13/cobra"
)

// natsServerVersion is the version of the nats-server module serve embeds
// (server.VERSION; TestNATSServerVersion keeps them equal): the default build
// does not link nats-server (serve_exec.go).
const natsServerVersion = "2.15.2"

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
// Otherwise it comes from the module's build info ("(devel)" in a source tree).
var version = ""

// versionString is the version line, worked out once: reading the build
// info is a parse of the module list every command would pay at start.
var versionString = sync.OnceValue(buildVersionString)

func buildVersionString() string {
	v, rev := version, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("syncledger %s%s (%s, %s/%s, embedded nats-server %s)",
		v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, natsServerVersion)
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of syncledger and its embedded nats-server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(a.stdout, versionString())
			return err
		},
	}
}
