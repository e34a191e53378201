// Command bench runs syncledger's benchmark harness (package bench). The CLI does
// not link the harness; run it from the repository root:
//
//	go run ./bench/cmd/bench --quick
//	go run ./bench/cmd/bench --wait-load 1.5 --append docs/bench-history.md
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/syncledger/syncledger/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, []string{exe})
	stop()
	os.Exit(code)
}
