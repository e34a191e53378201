package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/pflag"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
)

// Host opens this host's cache (--cache) bound to the ledger, on first use.
func (a *app) Host(ctx context.Context) (*host.Host, error) {
	lg, err := a.Log(ctx)
	if err != nil {
		return nil, err
	}
	bl, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	cfg := host.Config{Cache: a.cache, Host: a.host, Log: lg, Blobs: bl, Logger: a.logger}
	if err := a.setFailpoint(&cfg); err != nil {
		return nil, err
	}
	h, err := host.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open cache %s: %w", a.cache, err)
	}
	a.onClose(func() { _ = h.Close() })
	return h, nil
}

// ExistingHost is Host for the commands that only look at a cache (status,
// verify): looking must not make a directory a cache, so one without the
// state directory is a usage error naming --cache.
func (a *app) ExistingHost(ctx context.Context) (*host.Host, error) {
	state := filepath.Join(a.cache, ledger.StateDir)
	if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
		dir, _ := filepath.Abs(a.cache)
		return nil, usagef("%s is not a syncledger cache (it has no %s/): pass --cache DIR, or run 'syncledger sync' there to make it one", dir, ledger.StateDir)
	}
	return a.Host(ctx)
}

// scope is the --model/--partition selection of sync, commit, exec and log.
type scope struct {
	models     []string
	partitions []string
}

func (s *scope) addFlags(fs *pflag.FlagSet, verb string) {
	fs.StringArrayVar(&s.models, "model", nil, verb+" only this model's partitions, TYPE:ID (e.g. command/shell:vpc); repeatable")
	fs.StringArrayVar(&s.partitions, "partition", nil, verb+" only this partition key (e.g. data--aws--ec2--vpc--abc); repeatable")
}

// keys returns the selected partition keys, sorted; nil selects everything.
func (s scope) keys() ([]string, error) {
	var keys []string
	for _, m := range s.models {
		typ, id, err := parseModel(m)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ledger.PartitionKeysForModel(typ, id)...)
	}
	for _, p := range s.partitions {
		if p == "" {
			return nil, usagef("--partition: empty key")
		}
		keys = append(keys, p)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// printJSON writes v as one indented JSON document to stdout.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// scopedHost resolves the scope's partition keys and opens this host's cache.
func (a *app) scopedHost(ctx context.Context, s scope) ([]string, *host.Host, error) {
	parts, err := s.keys()
	if err != nil {
		return nil, nil, err
	}
	h, err := a.Host(ctx)
	return parts, h, err
}

// report prints a command's result: as JSON with --json (even beside an error,
// which it returns), else for people with human. A failure to print is returned
// only when the command itself succeeded.
func (a *app) report(asJSON bool, res any, err error, human func()) error {
	if asJSON {
		if perr := a.printJSON(res); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	human()
	return err
}
