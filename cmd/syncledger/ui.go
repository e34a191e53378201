package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/internal/loopback"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/snapshot"
	"github.com/syncledger/syncledger/ui"
)

// DefaultUIListen is where `syncledger ui` serves the dashboard by default.
const DefaultUIListen = "127.0.0.1:4280"

func newUICmd(a *app) *cobra.Command {
	var (
		listen string
		public bool
		poll   time.Duration
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the dashboard: stream head, commit rate, recent commits, hosts, partition heads",
		Long: `UI serves a small web page showing the ledger live: the stream head and the
commit rate, a timeline of recent commits (host, partitions, files), the hosts
with their high-water mark, how far behind the head they are and when they were
last seen (from their heartbeats, see "syncledger hosts"), and every partition's
chain head. The page updates itself (server-sent events from the same address;
/api/state is the same data as JSON). Its assets are part of the binary.

The dashboard only reads: the read-only tooling user is enough. It has no login,
so it listens on a loopback address unless --public is given; put it behind an
authenticating proxy to share it. "serve --ui ADDR" runs it inside serve.
SIGINT or SIGTERM stops it.`,
		Example: `  syncledger ui
  syncledger ui --listen 127.0.0.1:0 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := checkUIAddr(listen, public, "--public"); err != nil {
				return err
			}
			d, err := a.dashboard(ctx, poll)
			if err != nil {
				return err
			}
			url, done, err := a.startUI(ctx, d, listen, public)
			if err != nil {
				return err
			}
			if asJSON {
				err = a.printJSON(struct {
					URL string `json:"url"`
				}{url})
			} else {
				_, err = fmt.Fprintf(a.stdout, "dashboard of ledger %s on %s\n", a.ledgerName, url)
			}
			if err != nil {
				return err
			}
			<-ctx.Done()
			return done()
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", DefaultUIListen, "address to serve the dashboard on, host:port (port 0 picks one)")
	fs.BoolVar(&public, "public", false, "allow a non-loopback --listen address (the dashboard has no login)")
	fs.DurationVar(&poll, "poll", ui.DefaultPoll, "how often to read the head and the hosts")
	fs.BoolVar(&asJSON, "json", false, "print {url} as JSON once serving")
	a.bindEnv(fs, "listen", "SYNCLEDGER_UI_LISTEN")
	return cmd
}

// checkUIAddr refuses a malformed address, or a non-loopback one without the
// public flag.
func checkUIAddr(addr string, public bool, publicFlag string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("dashboard address %q: want host:port", addr)
	}
	if !public && !loopback.Host(host) {
		return usagef("refusing to serve the dashboard on %s: not a loopback address, and the dashboard has no login; give %s to serve it anyway (behind an authenticating proxy)", addr, publicFlag)
	}
	return nil
}

// dashboard returns a dashboard of the ledger, reading the hosts' heartbeats
// and, for large commits' entries, the blob store. poll (optional) overrides
// the dashboard's default polling interval.
func (a *app) dashboard(ctx context.Context, poll ...time.Duration) (*ui.Dashboard, error) {
	kv, err := a.Heartbeats(ctx)
	if err != nil {
		return nil, err
	}
	l, err := a.Log(ctx)
	if err != nil {
		return nil, err
	}
	var (
		mu        sync.Mutex
		hb        *heartbeat.Store
		openErr   error
		openErrAt time.Time
	)
	hosts := func(ctx context.Context) ([]ui.Host, error) {
		mu.Lock()
		defer mu.Unlock()
		if hb == nil {
			// A bucket that cannot be opened (missing, and this user may not
			// create it) is tried again once a minute, not at every poll.
			if openErr != nil && time.Since(openErrAt) < time.Minute {
				return nil, openErr
			}
			if _, err := kv.Open(ctx); err != nil {
				openErr, openErrAt = err, time.Now()
				return nil, err
			}
			hb = heartbeat.NewStore(kv)
		}
		list, err := hb.Scan(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]ui.Host, 0, len(list.Beats)+len(list.Bad))
		for _, b := range list.Beats {
			out = append(out, ui.Host{Host: b.Host, HWM: b.HWM, LastSeen: b.Seen.UTC(), Command: b.Command, Version: b.Version})
		}
		for _, b := range list.Bad { // a row of its own, never the end of the list
			out = append(out, ui.Host{Host: b.Key, LastSeen: b.Seen.UTC(), Error: b.Err})
		}
		return out, nil
	}
	cfg := ui.Config{Log: l, Ledger: a.ledgerName, Hosts: hosts, Logger: a.logger}
	if len(poll) > 0 {
		cfg.Poll = poll[0]
	}
	// After snapshot retention the log is complete only from its floor.
	cfg.Floor = func(ctx context.Context) (ledger.Seq, error) {
		_, floor, err := snapshot.Floor(ctx, l)
		return floor, err
	}
	if b, err := a.Blobs(ctx); err == nil {
		cfg.Blobs = b
	} else {
		a.logger.Warn("the dashboard will not list the files of large commits: cannot open the blob store", "err", err)
	}
	cfg.Partitions = l.Partitions
	if lg, err := a.ledgerOn(ctx, a.ledgerName); err == nil {
		cfg.Server = lg.ServerState
	}
	return ui.New(cfg)
}

// startUI serves d on addr until ctx is done. It returns the dashboard's URL
// and a function that waits for the server and the dashboard to stop.
func (a *app) startUI(ctx context.Context, d *ui.Dashboard, addr string, public bool) (string, func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("dashboard: %w", err)
	}
	srv := &http.Server{Handler: d.Handler(ui.HandlerOptions{Public: public}), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ran := make(chan struct{})
	go func() { _ = d.Run(ctx); close(ran) }()
	url := "http://" + ln.Addr().String() + "/"
	a.logger.Info("dashboard", "url", url, "ledger", a.ledgerName)
	done := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-ran
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("dashboard: %w", err)
		}
		return nil
	}
	return url, done, nil
}
