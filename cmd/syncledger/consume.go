package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/ledger"
)

func newConsumeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Run a consumer of the ledger's commits (audit, webhook, metrics, swamp-mirror), or inspect consumers",
		Long: `Consume runs one of the built-in consumers on a durable JetStream consumer of the
ledger, until interrupted (SIGINT or SIGTERM stop it cleanly: the commit in
progress is finished and acknowledged).

A consumer has a name (--name, default the consumer's kind) under which the
server keeps its position: restarting it resumes after the last commit it
acknowledged. Commits are handled one at a time in seq order, each once all of
its parts have arrived; a failed commit is retried with backoff (--backoff) up
to --max-deliver times, then published with the error to the dead-letter
subject syncledger.<ledger>.dlq.<name> and skipped. Delivery is at least once;
the audit consumer writes each commit to its file exactly once. (swamp-mirror
keeps its position in its target instead: see its help.)

--model TYPE:ID and --partition KEY (repeatable) restrict a new consumer to those
partitions; --start (all, new or a seq) says where a new consumer begins. Both
are fixed when the consumer is created: delete it (consume delete NAME) to
change them.

The server keeps consumers, and only an admin makes them: "consume create NAME"
(with the same --model, --partition and --start) as an admin, then run the
consumer as the tooling user the admin named it for ("config permissions
--consumer NAME"). An admin running a consumer that does not exist yet creates
it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConsumeAuditCmd(a), newConsumeWebhookCmd(a), newConsumeMetricsCmd(a),
		newConsumeSwampMirrorCmd(a), // consume_swamp_mirror.go (swamp interop)
		newConsumeCreateCmd(a), newConsumeStatusCmd(a), newConsumeDeadLettersCmd(a), newConsumeDeleteCmd(a))
	return cmd
}

// consumeOpts are the flags every consumer has.
type consumeOpts struct {
	name       string
	scope      scope
	start      string
	maxDeliver int
	backoff    []time.Duration
}

func (o *consumeOpts) addFlags(fs *pflag.FlagSet, kind, start string) {
	fs.StringVar(&o.name, "name", kind, "durable consumer name, [A-Za-z0-9_-]{1,64}")
	o.scope.addFlags(fs, "consume")
	fs.StringVar(&o.start, "start", start, "where a new consumer begins: all, new, or a seq")
	fs.IntVar(&o.maxDeliver, "max-deliver", consumers.DefaultMaxDeliver, "attempts per commit before it is dead-lettered")
	fs.DurationSliceVar(&o.backoff, "backoff", consumers.DefaultBackOff, "waits before the 2nd, 3rd, … attempt (the last repeats)")
}

// parse checks the consumer's name, start and scope.
func (o *consumeOpts) parse() (consumers.Start, []string, error) {
	if err := consumers.ValidateName(o.name); err != nil {
		return consumers.Start{}, nil, &usageError{err}
	}
	start, err := consumers.ParseStart(o.start)
	if err != nil {
		return consumers.Start{}, nil, &usageError{fmt.Errorf("--start: %w", err)}
	}
	keys, err := o.scope.keys()
	return start, keys, err
}

// run runs h on the consumer until ctx is done.
func (o *consumeOpts) run(ctx context.Context, a *app, h consumers.Handler) error {
	start, keys, err := o.parse()
	if err != nil {
		return err
	}
	if o.maxDeliver < 1 {
		return usagef("--max-deliver %d: want at least 1", o.maxDeliver)
	}
	feed, err := a.Feed(ctx)
	if err != nil {
		return err
	}
	l, err := a.Log(ctx)
	if err != nil {
		return err
	}
	r, err := consumers.New(consumers.Config{
		Feed: feed, Log: l, Name: o.name, Partitions: keys, Start: start, Handler: h,
		MaxDeliver: o.maxDeliver, BackOff: o.backoff, Logger: a.logger,
	})
	if err != nil {
		return &usageError{err}
	}
	a.logger.Info("consuming", "ledger", a.ledgerName, "consumer", o.name, "partitions", keys, "start", start)
	err = r.Run(ctx)
	st := r.Stats()
	a.logger.Info("consumer stopped", "consumer", o.name, "handled", st.Handled, "retries", st.Retries, "deadLetters", st.DeadLetters, "seq", st.Seq)
	if nc := (*ledger.NoConsumerError)(nil); errors.As(err, &nc) {
		return &noConsumerError{err: fmt.Errorf("consume %s: %w", o.name, err), create: o.createCommand(keys)}
	}
	if pe := (*ledger.PermissionError)(nil); errors.As(err, &pe) && (strings.HasPrefix(pe.Subject, "$JS.API.CONSUMER.") || strings.HasPrefix(pe.Subject, "$JS.ACK.")) {
		return fmt.Errorf("consume %s: %w (a tooling user runs only the consumers named for it: syncledger config permissions --consumer %s renders them, or consumers: [%s] for it in serve's users)", o.name, err, o.name, o.name)
	}
	if err != nil {
		return fmt.Errorf("consume %s: %w", o.name, err)
	}
	return nil
}

// createCommand is the admin's command that makes the consumer these options
// run.
func (o *consumeOpts) createCommand(keys []string) string {
	cmd := "syncledger consume create " + o.name
	for _, k := range keys {
		cmd += " --partition " + k
	}
	if o.start != "all" {
		cmd += " --start " + o.start
	}
	return cmd
}

// noConsumerError is a consumer that does not exist and that this user may
// not create, with the admin's command that makes it.
type noConsumerError struct {
	err    error
	create string
}

func (e *noConsumerError) Error() string { return e.err.Error() }
func (e *noConsumerError) Unwrap() error { return e.err }
func (e *noConsumerError) Commands() []string {
	return []string{e.create + "   (admin; then run this consumer again)"}
}

func newConsumeCreateCmd(a *app) *cobra.Command {
	var o consumeOpts
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a consumer's durable position on the server (the admin role)",
		Long: `Create makes the durable consumer NAME that "consume KIND --name NAME" runs,
without running it: its filter (--model, --partition) and where it begins
(--start: all, new or a seq) are fixed now. Only an admin may create consumers;
the tooling user that runs it needs the permissions of --consumer NAME
("config permissions --consumer NAME", or consumers: [NAME] in serve's users).
A consumer that exists with the same filter is left as it is.`,
		Example: `  syncledger consume create audit
  syncledger consume create hooks --model command/shell:vpc --start new`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			o.name = args[0]
			start, keys, err := o.parse()
			if err != nil {
				return err
			}
			feed, err := a.Feed(ctx)
			if err != nil {
				return err
			}
			if err := consumers.Create(ctx, consumers.Config{Feed: feed, Name: o.name, Partitions: keys, Start: start}); err != nil {
				return err
			}
			parts := "every partition"
			if len(keys) > 0 {
				parts = strings.Join(keys, ",")
			}
			_, err = fmt.Fprintf(a.stdout, "consumer %s: %s, from %s\n", o.name, parts, o.start)
			return err
		},
	}
	o.scope.addFlags(cmd.Flags(), "consume")
	cmd.Flags().StringVar(&o.start, "start", "all", "where the consumer begins: all, new, or a seq")
	return cmd
}

// Feed opens the ledger's feed (the consumers' delivery and dead letters) on
// the command's NATS client.
func (a *app) Feed(ctx context.Context) (ledger.Feed, error) {
	lg, err := a.ledgerOn(ctx, a.ledgerName)
	if err != nil {
		return nil, err
	}
	return lg.Feed()
}

// consumeBlobs opens the ledger's blob store to read manifests; without one,
// consumers list large commits' manifests as unresolved.
func consumeBlobs(ctx context.Context, a *app) *ledger.Bucket {
	b, err := a.Blobs(ctx)
	if err != nil {
		a.logger.Warn("the entries of large commits will not be listed: cannot open the blob store", "err", err)
		return nil
	}
	return b
}

func newConsumeStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List the ledger's consumers: position, lag, dead letters",
		Long: `Status lists the consumers made by "syncledger consume": the seq up to which
each has acknowledged every commit (ACKED), the events of its filter not yet
acknowledged (LAG), those delivered more than once and not yet acknowledged
(REDELIVERED), its dead letters, and whether a process is attached.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			feed, err := a.Feed(ctx)
			if err != nil {
				return err
			}
			ps, err := consumers.Positions(ctx, feed)
			if err != nil {
				return err
			}
			if asJSON {
				if ps == nil {
					ps = []consumers.Position{}
				}
				return a.printJSON(ps)
			}
			if len(ps) == 0 {
				_, err := fmt.Fprintf(a.stdout, "ledger %s has no consumers\n", a.ledgerName)
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPARTITIONS\tACKED\tHEAD\tLAG\tREDELIVERED\tDEAD LETTERS\tATTACHED")
			for _, p := range ps {
				parts := "all"
				if len(p.Partitions) > 0 {
					parts = strings.Join(p.Partitions, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%v\n", p.Name, parts, p.AckFloor, p.Head, p.Lag, p.Redelivered, p.DeadLetters, p.Waiting > 0)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func newConsumeDeadLettersCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dead-letters [NAME]",
		Short: "Print the commits a consumer gave up on, with their errors",
		Long: `Dead-letters prints the dead letters of consumer NAME (of every consumer without
NAME), oldest first: the commit's seq and id, the attempts, and the last error.
With --json, one JSON object per dead letter, holding the events as stored.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			name := ""
			if len(args) == 1 {
				name = args[0]
				if err := consumers.ValidateName(name); err != nil {
					return &usageError{err}
				}
			}
			feed, err := a.Feed(ctx)
			if err != nil {
				return err
			}
			return consumers.ReadDeadLetters(ctx, feed, name, func(d consumers.DeadLetter) error {
				if asJSON {
					return a.printJSON(d)
				}
				_, err := fmt.Fprintf(a.stdout, "%6d  %s  %s  %s  %d attempts  %s\n", d.Seq, d.At.Format(time.RFC3339), d.Consumer, d.Commit, d.Attempts, oneLine(d.Error))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per dead letter")
	return cmd
}

func newConsumeDeleteCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a consumer and its position (its dead letters stay; the admin role)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := consumers.ValidateName(args[0]); err != nil {
				return &usageError{err}
			}
			feed, err := a.Feed(ctx)
			if err != nil {
				return err
			}
			if err := consumers.Delete(ctx, feed, args[0]); err != nil {
				if errors.Is(err, ledger.ErrNotFound) {
					return fmt.Errorf("%w (see syncledger consume status)", err)
				}
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "deleted consumer %s\n", args[0])
			return err
		},
	}
}
