package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/blobs"
	"github.com/syncledger/syncledger/natsauth"
	"github.com/syncledger/syncledger/projector/host"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the configuration in effect; print NATS permission templates",
		Long: `Settings come from, in order of precedence: the command line, the environment
(listed with each flag in --help), the configuration file, and the flags'
defaults.

The configuration file is YAML (--config FILE, env SYNCLEDGER_CONFIG, default
$XDG_CONFIG_HOME/syncledger/config.yaml, i.e. ~/.config/syncledger/config.yaml,
if it exists). Its keys are flag names: global flags at the top level, a
command's flags in a mapping named after the command (nested for subcommands).
An unknown key is an error. Keep secrets out of it (use --nats-creds or
--nats-nkey files), or chmod 600 it.

  nats: tls://nats.example.com:4222
  nats-creds: /etc/syncledger/host.creds
  nats-ca: /etc/syncledger/ca.pem
  ledger: prod
  log-format: json
  serve:
    listen: 0.0.0.0:4222
    users: /etc/syncledger/users.yaml
  consume:
    webhook:
      url: https://hooks.example.com/syncledger`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConfigShowCmd(a), newConfigPermissionsCmd(a))
	return cmd
}

// setting is one flag's value in effect, as config show prints it.
type setting struct {
	Key    string `json:"key"`    // flag name; command.flag for a command's flag
	Value  any    `json:"value"`  // secrets are Redacted
	Source string `json:"source"` // flag, env NAME, file, default
}

func newConfigShowCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [COMMAND…]",
		Short: "Print the configuration in effect, secrets redacted",
		Long: `Show prints every global setting in effect with where it came from (flag, env
NAME, file or default), then the settings of the commands named as arguments
(e.g. "config show serve", "config show consume webhook"), or without
arguments, of every command the configuration file has settings for.

Secrets are printed as REDACTED: passwords, tokens, webhook secrets, inline
nkey seeds, serve's inline users' passwords, and the credentials of URLs (and
a webhook URL's path). File names (--nats-creds, --nats-nkey, --users) are
printed; their contents never are.

The text form is YAML that a configuration file can start from; --json prints
{file, settings: [{key, value, source}]}.`,
		Example: `  syncledger config show
  syncledger config show serve --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			targets, err := configTargets(a, cmd.Root(), args)
			if err != nil {
				return err
			}
			var out []setting
			add := func(prefix string, fs *pflag.FlagSet) {
				fs.VisitAll(func(f *pflag.Flag) {
					if f.Name == "help" || f.Name == "version" {
						return
					}
					out = append(out, setting{Key: prefix + f.Name, Value: displayValue(f), Source: a.source(f)})
				})
			}
			add("", a.globals)
			a.showCache(out)
			for _, c := range targets {
				if err := a.applyEnv(c); err != nil {
					return err
				}
				if err := a.applyFile(c); err != nil {
					return err
				}
				add(commandKey(c)+".", c.LocalFlags())
			}
			file := ""
			if a.cfg != nil {
				file = a.cfg.path
			}
			if asJSON {
				return a.printJSON(struct {
					File     string    `json:"file"`
					Settings []setting `json:"settings"`
				}{file, out})
			}
			return printSettings(a, file, out)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {file, settings: [{key, value, source}]} as JSON")
	return cmd
}

// showCache fills in the cache and host id a command would use where they come
// from the cache, not from a setting: the cache found at or above the working
// directory, and the id the cache keeps in .syncledger/host-id (the hostname
// default stands only until a cache is opened).
func (a *app) showCache(out []setting) {
	dir, found := a.cache, false
	if dir == "" {
		if wd, err := os.Getwd(); err == nil {
			dir, found = host.FindCache(wd)
		}
	}
	for i := range out {
		switch out[i].Key {
		case "cache":
			if found {
				out[i].Value, out[i].Source = dir, "found ("+ledger.StateDir+"/ at or above the working directory)"
			}
		case "host":
			if !a.hostDefault || dir == "" {
				continue
			}
			if id, stored, err := host.CacheHostID(dir); err == nil && stored {
				out[i].Value, out[i].Source = id, "cache ("+filepath.Join(ledger.StateDir, host.HostIDFile)+")"
			} else if err == nil {
				out[i].Value = host.DefaultHostID()
				out[i].Source = "default (the cache has no id yet: its first command records one, USER@HOST, with a random suffix if the ledger has a host of that name)"
			}
		}
	}
}

// commandKey is the dotted path of c below the root ("consume.webhook").
func commandKey(c *cobra.Command) string {
	var segs []string
	for ; c.HasParent(); c = c.Parent() {
		segs = append([]string{c.Name()}, segs...)
	}
	return strings.Join(segs, ".")
}

// configTargets returns the commands config show prints: those named by args,
// or those the configuration file has a section for.
func configTargets(a *app, root *cobra.Command, args []string) ([]*cobra.Command, error) {
	if len(args) > 0 {
		c, rest, err := root.Find(args)
		if err != nil || len(rest) > 0 || c == root {
			return nil, usagef("config show: no command %q", strings.Join(args, " "))
		}
		return []*cobra.Command{c}, nil
	}
	if a.cfg == nil {
		return nil, nil
	}
	var out []*cobra.Command
	var walk func(c *cobra.Command, m map[string]any)
	walk = func(c *cobra.Command, m map[string]any) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			mm, ok := m[k].(map[string]any)
			sub := subcommand(c, k)
			if !ok || sub == nil {
				continue
			}
			for k2, v := range mm {
				if _, isMap := v.(map[string]any); !isMap || subcommand(sub, k2) == nil {
					out = append(out, sub)
					break
				}
			}
			walk(sub, mm)
		}
	}
	walk(root, a.cfg.data)
	return out, nil
}

func (a *app) source(f *pflag.Flag) string {
	if f.Changed {
		return "flag"
	}
	if s := a.sources[f]; s != "" {
		return s
	}
	return "default"
}

// redactedValuer is a flag value that prints itself with its secrets hidden.
type redactedValuer interface {
	Redacted() any
}

// displayValue is f's value for config show: a string, or a list for a
// repeatable flag, secrets redacted.
func displayValue(f *pflag.Flag) any {
	if rv, ok := f.Value.(redactedValuer); ok {
		return rv.Redacted()
	}
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		list := sv.GetSlice()
		out := make([]string, len(list))
		for i, v := range list {
			out[i] = redactValue(f, v)
		}
		return out
	}
	v := redactValue(f, f.Value.String())
	switch t := f.Value.Type(); {
	case t == "bool", strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		// Numbers and booleans as such, not as strings.
		var x any
		if err := yaml.Unmarshal([]byte(v), &x); err == nil && x != nil {
			if _, isStr := x.(string); !isStr {
				return x
			}
		}
	}
	return v
}

func yamlValue(v any) string {
	if s, ok := v.(string); ok && strings.ContainsAny(s, "\n\r") {
		return strconv.Quote(s)
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return strconv.Quote(fmt.Sprint(v))
	}
	out := strings.TrimRight(string(b), "\n")
	if strings.Contains(out, "\n") {
		// A list or mapping: YAML flow style on one line.
		n := yaml.Node{}
		if err := n.Encode(v); err == nil {
			setFlow(&n)
			if b, err := yaml.Marshal(&n); err == nil {
				out = strings.TrimRight(string(b), "\n")
			}
		}
	}
	return out
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

func printSettings(a *app, file string, out []setting) error {
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "# syncledger configuration in effect (secrets are shown as REDACTED)")
	if file == "" {
		fmt.Fprintln(w, "# configuration file: none")
	} else {
		fmt.Fprintf(w, "# configuration file: %s\n", file)
	}
	var section []string
	for _, s := range out {
		segs := strings.Split(s.Key, ".")
		path, name := segs[:len(segs)-1], segs[len(segs)-1]
		common := 0
		for common < len(path) && common < len(section) && path[common] == section[common] {
			common++
		}
		for i := common; i < len(path); i++ {
			fmt.Fprintf(w, "%s%s:\n", strings.Repeat("  ", i), path[i])
		}
		section = path
		fmt.Fprintf(w, "%s%s: %s\t# %s\n", strings.Repeat("  ", len(path)), name, yamlValue(s.Value), s.Source)
	}
	return w.Flush()
}

func newConfigPermissionsCmd(a *app) *cobra.Command {
	var (
		users     []string
		consumers []string
		role      string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "permissions",
		Short: "Print a nats-server authorization block with the host and tooling roles",
		Long: `Permissions prints a nats-server authorization block for the ledger --ledger:
the subject permissions of the host role (publish commits, write blobs,
heartbeats and swamp keys, read the ledger) and of the tooling role (read; fetch
and acknowledge only the durable consumers named with --consumer, which an
admin creates with "consume create"), and the users given with --user
NAME:ROLE or --user NKEY:ROLE (roles: admin, host, tooling; NAME:tooling:C1,C2
for a tooling user with consumers of its own). No role below admin creates or
changes a stream, a bucket or a consumer. Give each host a user of its own:
removing it revokes that host alone. A user's password is read by nats-server
from the environment variable SYNCLEDGER_PASSWORD_<NAME>.
deploy/nats/permissions/ holds the output for the ledger "default".

--role ROLE prints that role's grants instead, one per line: verb, subject,
allow or deny, the resource and why (--json: as JSON). --json alone prints the
host and tooling permissions, and the version of these permissions.

The blobs' object store bucket is the one of --blobs when it is a nats:// URL,
else the one init creates (syncledger-LEDGER); a non-NATS --blobs omits it.
serve --users applies the same roles to the embedded server. Re-render them
after upgrading syncledger when status says the server's are older.`,
		Example: `  syncledger --ledger prod config permissions --user ops:admin --user web-1:host --user web-2:host --user grafana:tooling --consumer audit > auth.conf
  syncledger --ledger prod config permissions --role tooling --consumer audit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := permissionScope(a.ledgerName, a.blobsURL)
			if err != nil {
				return err
			}
			scope.Consumers = consumers
			if role != "" {
				r, err := natsauth.ParseRole(role)
				if err != nil {
					return usagef("--role: %v", err)
				}
				g, err := natsauth.Grants(r, scope)
				if err != nil {
					return &usageError{err}
				}
				if asJSON {
					if g == nil {
						g = []natsauth.Grant{}
					}
					return a.printJSON(struct {
						Version int              `json:"version"`
						Role    natsauth.Role    `json:"role"`
						Grants  []natsauth.Grant `json:"grants"`
					}{natsauth.Version, r, g})
				}
				if r == natsauth.RoleAdmin {
					_, err := fmt.Fprintln(a.stdout, "admin: no restriction")
					return err
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "VERB\tSUBJECT\tRULE\tRESOURCE\tWHY")
				for _, x := range g {
					kind := "allow"
					if x.Deny {
						kind = "deny"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.Verb, x.Subject, kind, x.Resource, x.Why)
				}
				return tw.Flush()
			}
			if asJSON {
				out := map[string]any{"version": natsauth.Version}
				for _, r := range []natsauth.Role{natsauth.RoleHost, natsauth.RoleTooling} {
					if out[string(r)], err = natsauth.For(r, scope); err != nil {
						return &usageError{err}
					}
				}
				return a.printJSON(out)
			}
			var us []natsauth.User
			for _, s := range users {
				u, err := natsauth.ParseUser(s)
				if err != nil {
					return usagef("--user: %v", err)
				}
				us = append(us, u)
			}
			conf, err := natsauth.Render(scope, us)
			if err != nil {
				return &usageError{err}
			}
			_, err = fmt.Fprint(a.stdout, conf)
			return err
		},
	}
	cmd.Flags().StringArrayVar(&users, "user", []string{"admin:admin", "host:host", "tooling:tooling"}, "a user, NAME:ROLE or NKEY:ROLE (NAME:tooling:CONSUMER,… for its own consumers; NAME:host:HOST,… to write those hosts' heartbeats only); repeatable")
	cmd.Flags().StringArrayVar(&consumers, "consumer", nil, "a durable consumer the tooling role runs (consume … --name NAME); repeatable")
	cmd.Flags().StringVar(&role, "role", "", "print this role's grants (admin, host, tooling) instead")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the host and tooling permissions as JSON instead")
	return cmd
}

// permissionScope is the natsauth scope of a ledger whose blobs are at blobsURL
// ("" means init's default, a NATS object store bucket).
func permissionScope(ledgerName, blobsURL string) (natsauth.Scope, error) {
	s := natsauth.Scope{Ledger: ledgerName, ObjectBucket: "syncledger-" + ledgerName}
	if blobsURL != "" {
		spec, err := blobs.ParseURL(blobsURL)
		if err != nil {
			return s, &usageError{err}
		}
		s.ObjectBucket = ""
		if spec.Scheme == blobs.SchemeNATS {
			s.ObjectBucket = spec.Bucket
		}
	}
	return s, nil
}
