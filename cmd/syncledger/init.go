package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// defaultInitBlobs is the blob store of a ledger created by init without --blobs:
// a NATS object store bucket beside the stream, with as many replicas, reachable
// by every host that reaches NATS.
func defaultInitBlobs(ledgerName string, replicas int) string {
	u := "nats://syncledger-" + ledgerName
	if replicas > 1 {
		u += "?replicas=" + strconv.Itoa(replicas)
	}
	return u
}

func newInitCmd(a *app) *cobra.Command {
	var replicas, format int
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a ledger (idempotent) and print its UUID",
		Long: `Create the ledger named by --ledger on the NATS server at --nats and print its
UUID (its lineage, fixed at creation) on stdout.

The ledger's settings are stored with it: its blob store (--blobs; default
nats://syncledger-LEDGER, a NATS object store bucket on the same servers,
replicated like the stream) and its
replica count. Hosts then need only the NATS URL and the ledger name.

Running init on an existing ledger changes nothing and prints its UUID; asking
for a different blob store or replica count than it has is an error.

--format 2 raises an existing ledger's log format to 2, which this release
creates ledgers with: swamp's locks are then fenced (a host stopped past a
lock's TTL cannot publish under it: docs/swamp.md). Releases before it do not
read format 2 and refuse the ledger, saying to upgrade: run it once every host,
consumer and dashboard of the ledger runs this release (admin).`,
		Example: `  syncledger init
  syncledger init --ledger prod --replicas 3 --blobs 's3://bucket/ledgers/prod?region=eu-west-1'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if replicas < 1 || replicas > 5 {
				return usagef("--replicas %d: want 1 to 5", replicas)
			}
			blobsURL := a.blobsURL
			if blobsURL == "" {
				blobsURL = defaultInitBlobs(a.ledgerName, replicas)
			}
			info, created, err := createLedger(ctx, a, natsjs.LedgerConfig{Name: a.ledgerName, Blobs: blobsURL, Replicas: replicas})
			if err != nil {
				return err
			}
			if !created {
				if a.blobsURL != "" && info.Blobs != a.blobsURL {
					return fmt.Errorf("ledger %q exists with blob store %s, not %s (a ledger's blob store is fixed at creation): %w", info.Name, redactURL(info.Blobs), redactURL(a.blobsURL), ledger.ErrInvalid)
				}
				if cmd.Flags().Changed("replicas") && info.Replicas != replicas {
					return fmt.Errorf("ledger %q exists with %d replicas, not %d: %w", info.Name, info.Replicas, replicas, ledger.ErrInvalid)
				}
			}
			if err := a.raiseFormat(ctx, info, format); err != nil {
				return err
			}
			a.protectBlobs(ctx, info.Blobs)
			verb := "exists"
			if created {
				verb = "created"
			}
			a.logger.Info("ledger "+verb, "ledger", info.Name, "uuid", info.UUID, "blobs", redactURL(info.Blobs), "replicas", info.Replicas)
			_, err = fmt.Fprintln(a.stdout, info.UUID)
			return err
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 1, "JetStream replicas of the ledger's stream (1, or 3 on a cluster)")
	cmd.Flags().IntVar(&format, "format", 0, fmt.Sprintf("raise an existing ledger's log format to this (%d: fenced swamp locks; see above)", ledger.LogFormat))
	a.bindEnv(cmd.Flags(), "replicas", "SYNCLEDGER_REPLICAS")
	return cmd
}

// createLedger opens the ledger cfg.Name, creating it with cfg (and a new UUID)
// if it does not exist. Before creating it probes cfg.Blobs (probeBlobs), so no
// ledger is created pointing at a blob store that cannot be used. The opened log
// becomes a's log.
// raiseFormat raises the ledger's log format to want (0: leave it, saying
// when it is older than this release's).
func (a *app) raiseFormat(ctx context.Context, info ledger.Info, want int) error {
	switch {
	case want == 0 && info.Format < ledger.LogFormat:
		a.logger.Warn(fmt.Sprintf("ledger %q is log format %d: swamp's locks are not fenced (a host stopped past a lock's TTL could publish under a lock another host took); "+
			"once every host, consumer and dashboard runs this release: syncledger --ledger %s init --format %d", info.Name, info.Format, info.Name, ledger.LogFormat))
		return nil
	case want == 0 || want == info.Format:
		return nil
	case want != ledger.LogFormat:
		return usagef("--format %d: this release writes log format %d", want, ledger.LogFormat)
	}
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	had, err := l.RaiseFormat(ctx)
	if err != nil {
		return err
	}
	a.logger.Info("ledger log format raised", "ledger", info.Name, "from", had, "to", ledger.LogFormat)
	return nil
}

func createLedger(ctx context.Context, a *app, cfg natsjs.LedgerConfig) (info ledger.Info, created bool, err error) {
	lg, err := a.ledgerOn(ctx, cfg.Name)
	if err != nil {
		return info, false, err
	}
	l, err := lg.Log(ctx)
	if ce := (*ledger.ConfigError)(nil); errors.As(err, &ce) && ce.Setting == "republish" {
		// A ledger made before followers read the stream's republish: the
		// admin's init adds it (natsjs.RePublishRepair).
		if _, rerr := lg.RePublish(ctx); rerr != nil {
			return info, false, fmt.Errorf("%w; adding it: %w", err, rerr)
		}
		a.logger.Info("ledger upgraded: its stream now republishes what it stores (followers read it, holding no consumer)", "ledger", cfg.Name)
		l, err = lg.Log(ctx)
	}
	switch {
	case err == nil:
	case errors.Is(err, ledger.ErrNotFound):
		if err := a.probeBlobs(ctx, cfg.Blobs); err != nil {
			return info, false, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
		}
		if cfg.UUID == "" {
			if cfg.UUID, err = ledger.NewLineageID(rand.Reader); err != nil {
				return info, false, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
			}
		}
		if l, err = lg.Create(ctx, cfg); err != nil {
			return info, false, fmt.Errorf("create ledger %q: %w", cfg.Name, err)
		}
		created = true
	default:
		return info, false, err // it names the ledger
	}
	if info, err = l.Info(ctx); err != nil {
		return info, false, fmt.Errorf("read ledger %q settings: %w", cfg.Name, err)
	}
	a.res.logMu.Lock()
	a.res.log = l
	a.res.logMu.Unlock()
	return info, created, nil
}
