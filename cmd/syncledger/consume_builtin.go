package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/consumers/audit"
	"github.com/syncledger/syncledger/consumers/webhook"
	"github.com/syncledger/syncledger/ledger"
)

// auditGapError is the audit consumer's refusal to record past a gap, with
// the ways out: the admin moves the consumer back to the seq after the file's
// last, or the operator accepts the gap.
type auditGapError struct {
	err        error
	gap        *audit.GapError
	name, file string
}

func (e *auditGapError) Error() string { return e.err.Error() }
func (e *auditGapError) Unwrap() error { return e.err }
func (e *auditGapError) Commands() []string {
	return []string{
		// An admin's delete, then the consumer again from the seq after the file's last.
		fmt.Sprintf("syncledger consume delete %s && syncledger consume audit --name %s --file %s --start %d", e.name, e.name, e.file, e.gap.Last+1),
		// Or the gap's commits left out knowingly.
		fmt.Sprintf("syncledger consume audit --name %s --file %s --accept-gap-to %d", e.name, e.file, e.gap.Next),
	}
}

func newConsumeAuditCmd(a *app) *cobra.Command {
	var (
		o        consumeOpts
		path     string
		maxSize  string
		maxFiles int
		noSync   bool
		gapTo    uint64
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Append one JSON line per commit to a file (or stdout)",
		Long: `Audit appends one JSON line per commit — ledger, seq, commit id, host, time,
message, partitions, events, and every entry's path, sha256, size and mode — to
--file, rotating it by size (to FILE.<seq of its last line>), or to stdout with
--file -.

Each commit is written to the file exactly once, in seq order, across crashes
and restarts: on start the last line's seq is read back and commits at or below
it are skipped. Lines are written before the commits are acknowledged, and
fsynced unless --no-fsync. One process per file (FILE.lock).

A commit given after seqs the consumer was not given (its position moved:
only the admin and the consumer's own restart may move it) is refused, naming
the missed seqs: start the consumer again at the seq after the file's last
(an admin's 'consume delete', then --start), or pass --accept-gap-to SEQ to
leave those commits out knowingly (commits dead-lettered in an earlier run).`,
		Example: `  syncledger consume audit --file /var/log/syncledger/audit.jsonl
  syncledger consume audit --file - --start new --model command/shell:vpc`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			size, err := parseSize(maxSize)
			if err != nil {
				return usagef("--max-size %q: %v", maxSize, err)
			}
			cfg := audit.Config{Ledger: a.ledgerName, MaxSize: size, MaxFiles: maxFiles, Sync: !noSync}
			if path == "-" {
				cfg.Out = a.rawStdout // the records, byte for byte
			} else {
				cfg.Path = path
			}
			l, err := a.Log(ctx)
			if err != nil {
				return err
			}
			if cfg.Partitions, err = o.scope.keys(); err != nil {
				return err
			}
			cfg.Log, cfg.AcceptGapTo = l, ledger.Seq(gapTo)
			cfg.Blobs = consumeBlobs(ctx, a)
			w, err := audit.Open(cfg)
			if err != nil {
				return err
			}
			defer w.Close()
			err = o.run(ctx, a, w)
			if ge := (*audit.GapError)(nil); errors.As(err, &ge) {
				return &auditGapError{err: err, gap: ge, name: o.name, file: path}
			}
			return err
		},
	}
	fs := cmd.Flags()
	o.addFlags(fs, "audit", "all")
	fs.StringVar(&path, "file", "-", "audit file; - for stdout")
	fs.Uint64Var(&gapTo, "accept-gap-to", 0, "record past a gap in the seqs given if the commit after it is at or below this seq")
	fs.StringVar(&maxSize, "max-size", "100MiB", "rotate the file before it exceeds this size (B, KiB, MiB, GiB); 0 never")
	fs.IntVar(&maxFiles, "max-files", 0, "rotated files to keep; 0 keeps all")
	fs.BoolVar(&noSync, "no-fsync", false, "do not fsync the file before acknowledging (exactly once across process crashes only, not power loss)")
	return cmd
}

// parseSize parses "0", "512", "64KiB", "100MiB", "1GiB" (also K, M, G, KB, MB, GB as powers of 1024).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want a size such as 100MiB")
	}
	if n == 0 {
		return -1, nil // never rotate
	}
	return n * mult, nil
}

func newConsumeWebhookCmd(a *app) *cobra.Command {
	var (
		o          consumeOpts
		url        string
		secret     string
		secretFile string
		timeout    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "POST each commit as JSON to a URL, signed with a shared secret",
		Long: `Webhook POSTs each commit as JSON (the audit line's format) to --url with the
headers Idempotency-Key: <commit id> and X-Syncledger-Signature: sha256=<hex
HMAC-SHA256 of the body with the secret>, plus X-Syncledger-Ledger and
X-Syncledger-Seq. A 2xx answer acknowledges the commit; transport errors,
timeouts, 5xx, 408, 425 and 429 are retried with backoff; any other answer
dead-letters the commit at once. Delivery is at least once: receivers
deduplicate by Idempotency-Key.`,
		Example: `  SYNCLEDGER_WEBHOOK_SECRET=… syncledger consume webhook --url https://hooks.example.com/syncledger`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if secretFile != "" {
				b, err := os.ReadFile(secretFile)
				if err != nil {
					return usagef("--secret-file: %v", err)
				}
				secret = strings.TrimSpace(string(b))
			}
			if secret == "" {
				return usagef("no secret: set --secret-file, SYNCLEDGER_WEBHOOK_SECRET or --secret")
			}
			if _, err := a.Log(ctx); err != nil {
				return err
			}
			h, err := webhook.New(webhook.Config{URL: url, Secret: []byte(secret), Ledger: a.ledgerName,
				Timeout: timeout, Blobs: consumeBlobs(ctx, a)})
			if err != nil {
				return &usageError{err}
			}
			return o.run(ctx, a, h)
		},
	}
	fs := cmd.Flags()
	o.addFlags(fs, "webhook", "new")
	fs.StringVar(&url, "url", "", "endpoint URL (http or https)")
	fs.StringVar(&secret, "secret", "", "HMAC secret shared with the receiver (prefer the environment or --secret-file)")
	fs.StringVar(&secretFile, "secret-file", "", "file holding the HMAC secret")
	fs.DurationVar(&timeout, "timeout", webhook.DefaultTimeout, "bound on one POST, answer included")
	a.bindEnv(fs, "secret", "SYNCLEDGER_WEBHOOK_SECRET")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}
