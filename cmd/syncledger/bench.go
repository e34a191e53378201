package main

import (
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/bench"
)

// newBenchCmd is `syncledger bench`: the benchmark harness (package bench), the
// same as `go run ./bench/cmd/bench`. Its flags are the harness's own.
func newBenchCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:                "bench [--quick] [--only B1,…] [--append BENCHMARKS.md] [flags]",
		Short:              "Run the benchmark harness (B1–B9 against raw JetStream baselines)",
		Long:               bench.Usage + "  (run 'syncledger bench --help' for the harness's flags)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
				// Cobra's usage, then the harness's own flags, both on stdout.
				_ = cmd.Help()
				bench.Main(cmd.Context(), []string{"-h"}, a.stdout, a.stdout, nil)
				return nil
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			// The harness re-executes "syncledger bench" for its child processes.
			if code := bench.Main(cmd.Context(), args, a.stdout, a.stderr, []string{exe, "bench"}); code != 0 {
				return withExitCode(code, nil) // the harness printed its error
			}
			return nil
		},
	}
}
