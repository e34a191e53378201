package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/projector/host"
)

// hostRow is one host as `hosts --json` prints it.
type hostRow struct {
	Host     string     `json:"host"`
	HWM      ledger.Seq `json:"hwm"`
	Behind   uint64     `json:"behind"`   // the ledger's last seq now − hwm
	HeadSeen ledger.Seq `json:"headSeen"` // the ledger's last seq as the host last saw it
	LastSeen time.Time  `json:"lastSeen"` // when the server stored its last heartbeat
	Time     time.Time  `json:"time"`     // the host's clock in that heartbeat
	Version  string     `json:"version,omitempty"`
	Command  string     `json:"command,omitempty"`
}

// badRow is a key of the heartbeat bucket whose value is not a heartbeat, as
// `hosts --json` reports it (heartbeat.Bad).
type badRow = heartbeat.Bad

func newHostsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "List the hosts of the ledger: HWM, how far behind, last seen",
		Long: `Hosts lists every host that has synced the ledger, from the heartbeats sync,
watch, exec and the swamp agent (after each swamp command's pull and push) record
in the ledger's key-value bucket SYNCLEDGER_HOSTS_<ledger>:
its high-water mark, how many seqs it is behind the ledger's last seq now, and
when its last heartbeat arrived (server time). A watching host beats every 30 s
while idle; a host that only runs sync is seen when it syncs (a cache does not
repeat an unchanged beat within 10 s).

Every host may write that bucket, so a value that is not a heartbeat (or a
heartbeat under a key that is not its host's) is listed apart as skipped,
with why and how to remove it; the other hosts are listed as ever ("skipped"
in --json).

A server whose disk is full (it refuses every host's writes until space is
freed there) is said first, with what it says of its disk.

"hosts forget HOST" removes a host that is gone for good; "hosts forget KEY"
removes a skipped key. It reads the bucket again and fails if it is still
there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			l, err := a.Log(ctx)
			if err != nil {
				return err
			}
			hd, err := l.Head(ctx, ledger.HeadRequest{})
			if err != nil {
				return err
			}
			head := hd.Seq
			kv, err := a.Heartbeats(ctx)
			if err != nil {
				return err
			}
			list, err := heartbeat.NewStore(kv).Scan(ctx)
			if err != nil {
				return err
			}
			rows := make([]hostRow, len(list.Beats))
			for i, b := range list.Beats {
				rows[i] = hostRow{Host: b.Host, HWM: b.HWM, HeadSeen: b.Head, LastSeen: b.Seen.UTC(), Time: b.Time,
					Version: b.Version, Command: b.Command}
				if head > b.HWM {
					rows[i].Behind = uint64(head - b.HWM)
				}
			}
			for _, b := range list.Bad {
				a.logger.Warn("skipping a value of the heartbeat bucket that is not a heartbeat", "key", b.Key, "why", b.Err)
			}
			server := a.serverState(ctx)
			if asJSON {
				return a.printJSON(struct {
					Ledger  string              `json:"ledger"`
					Head    ledger.Seq          `json:"head"`
					Source  ledger.Head         `json:"source"` // where head came from, how stale
					Hosts   []hostRow           `json:"hosts"`
					Skipped []badRow            `json:"skipped"`
					Server  *ledger.ServerState `json:"server,omitempty"`
				}{a.ledgerName, head, hd, rows, list.Bad, server})
			}
			if server != nil && server.Full {
				fmt.Fprintf(a.stdout, "the server's disk is full, every host's writes are refused: %s (%s)\n", server, serverFullNote(*server))
			}
			if len(rows) == 0 {
				fmt.Fprintf(a.stdout, "no host has reported to ledger %s yet (head %d)\n", a.ledgerName, head)
			} else {
				now := time.Now()
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintf(tw, "HOST\tHWM\tBEHIND\tLAST SEEN\tCOMMAND\tVERSION\n")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s ago\t%s\t%s\n", oneLine(r.Host), r.HWM, r.Behind,
						now.Sub(r.LastSeen).Round(time.Second), oneLine(r.Command), oneLine(r.Version))
				}
				fmt.Fprintf(tw, "(ledger %s head %d)\n", a.ledgerName, head)
				if !hd.FromOrigin() {
					// Read through a mirror: BEHIND counts from its head.
					fmt.Fprintf(tw, "(head from %s)\n", hd.Describe(now))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			for _, b := range list.Bad {
				fmt.Fprintf(a.stdout, "skipped key %q, not a heartbeat: %s (remove it: syncledger hosts forget %s)\n",
					b.Key, oneLine(b.Err), host.ShellQuote(b.Key))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {ledger, head, hosts: […], skipped: […], server: {full, dir, free, …}} as JSON")
	forget := &cobra.Command{
		Use:   "forget HOST|KEY",
		Short: "Remove a host's heartbeat, or a skipped key of the heartbeat bucket",
		Long: `Forget removes the heartbeat of host HOST (a host gone for good), or the value
under KEY that 'syncledger hosts' lists as skipped. It then reads the bucket
again, and says what it removed only once it is gone; it fails when nothing
has that name, or when the host beat again meanwhile (it is running: stop it
first).

Only the admin role may forget: the key is removed by a purge of the bucket's
stream, which the server refuses every role below admin. (A host user scoped
to its host id — serve --users "hosts:" — may delete its own key through NATS
itself, and no other; an unscoped host user any key: its heartbeats are
monitoring, not a boundary.)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			kv, err := a.Heartbeats(ctx)
			if err != nil {
				return err
			}
			// A refused operation on the bucket fails at once (natsjs).
			r, err := heartbeat.NewStore(kv).Remove(ctx, args[0])
			if errors.Is(err, ledger.ErrPermission) {
				return fmt.Errorf("%w (only the admin role may forget a host: run it with the admin's credentials)", err)
			}
			if err != nil {
				return err
			}
			if r.Host != "" {
				_, err = fmt.Fprintf(a.stdout, "forgot host %s (key %s)\n", oneLine(r.Host), r.Key)
			} else {
				_, err = fmt.Fprintf(a.stdout, "removed key %q (it held no heartbeat)\n", r.Key)
			}
			return err
		},
	}
	cmd.AddCommand(forget)
	return cmd
}

// beat records this host's position in the ledger's heartbeat bucket (see
// `syncledger hosts`). It is best effort: a failure is logged as a warning and
// never fails the command. sync and exec call it after their sync.
//
// A beat the cache's own last one already said (same ledger, host, position,
// command and version, acknowledged less than beatQuiet ago) is not sent
// again: a no-op sync run by every swamp command would otherwise spend a
// round trip to the server on it (issue 17), and "last seen" stays within
// beatQuiet of the truth.
func (a *app) beat(ctx context.Context, command string, hwm, head ledger.Seq) {
	b := heartbeat.Beat{Host: a.host, HWM: hwm, Head: max(head, hwm), Version: shortVersion(), Command: command}
	last := lastBeat{Ledger: a.ledgerName, Beat: b}
	if a.cache != "" && last.recent(a.cache) {
		return
	}
	kv, err := a.Heartbeats(ctx)
	if err == nil {
		bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		// A user without the host role may not beat: that is a warning too.
		if err = heartbeat.NewStore(kv).Put(bctx, b); errors.Is(err, ledger.ErrPermission) {
			err = fmt.Errorf("%w (the host role may; a host user given host ids writes only theirs: run as one of them, --host ID)", err)
		}
	}
	if err != nil {
		a.logger.Warn("heartbeat not recorded", "err", err)
		return
	}
	if a.cache != "" {
		last.store(a.cache)
	}
}

// Heartbeats returns the ledger's heartbeat bucket on the command's NATS
// client, opened on first use (a beat before that is one publish). An
// operation on it the server refuses fails at once with ledger.ErrPermission.
func (a *app) Heartbeats(ctx context.Context) (*natsjs.BucketKV, error) {
	lg, err := a.ledgerOn(ctx, a.ledgerName)
	if err != nil {
		return nil, err
	}
	return lg.Heartbeats()
}

// beatQuiet is how long a cache does not repeat an unchanged heartbeat.
const beatQuiet = 10 * time.Second

// lastBeatFile, in a cache's state directory, holds the cache's last
// acknowledged heartbeat (lastBeat as JSON). Losing it costs one beat.
const lastBeatFile = "last-beat"

// lastBeat is a heartbeat as the cache that sent it remembers it.
type lastBeat struct {
	Ledger string `json:"ledger"`
	heartbeat.Beat
	At time.Time `json:"at"` // when it was acknowledged
}

// recent reports whether the cache's last acknowledged beat is b's and younger
// than beatQuiet.
func (b lastBeat) recent(cache string) bool {
	data, err := os.ReadFile(filepath.Join(cache, ledger.StateDir, lastBeatFile))
	if err != nil {
		return false
	}
	var prev lastBeat
	if json.Unmarshal(data, &prev) != nil {
		return false
	}
	age := time.Since(prev.At)
	return age >= 0 && age < beatQuiet && prev.Ledger == b.Ledger && prev.Host == b.Host &&
		prev.HWM == b.HWM && prev.Head == b.Head && prev.Command == b.Command && prev.Version == b.Version
}

// store records b as the cache's last acknowledged beat, now (best effort).
func (b lastBeat) store(cache string) {
	b.At = time.Now()
	data, err := json.Marshal(b)
	if err != nil {
		return
	}
	dir := filepath.Join(cache, ledger.StateDir)
	tmp, err := os.CreateTemp(dir, lastBeatFile+".*")
	if err != nil {
		return
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, lastBeatFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}

// beatReporter records this host's position while a long-running command (watch)
// runs: at once, every heartbeat.DefaultInterval while idle, and soon after each
// Update (call it after each applied commit). The HWM is read from the cache's
// state and the head from the log before each beat. It stops, with a last beat,
// when the command ends. On failure it logs a warning and returns nil, whose
// methods do nothing.
func (a *app) beatReporter(ctx context.Context, command string, h *host.Host) *heartbeat.Reporter {
	kv, err := a.Heartbeats(ctx)
	var l *natsjs.Log
	if err == nil {
		l, err = a.Log(ctx)
	}
	var rep *heartbeat.Reporter
	if err == nil {
		rep, err = heartbeat.NewReporter(ctx, heartbeat.ReporterConfig{
			KV: kv, Logger: a.logger,
			Beat: heartbeat.Beat{Host: a.host, Version: shortVersion(), Command: command},
			Position: func(ctx context.Context) (ledger.Seq, ledger.Seq, error) {
				head, err := l.LastSeq(ctx)
				return h.HWM(), head, err
			},
		})
	}
	if err != nil {
		a.logger.Warn("heartbeats will not be recorded", "err", err)
		return nil
	}
	a.onClose(rep.Close)
	return rep
}

// shortVersion is the version for heartbeats: versionString without the
// toolchain details.
func shortVersion() string {
	v, _, _ := strings.Cut(strings.TrimPrefix(versionString(), "syncledger "), " (go")
	return v
}
