package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// The configuration file is YAML whose keys are flag names: a global flag at the
// top level, a command's own flags in a mapping named after the command (nested
// for subcommands). Every key must name a flag or a command, so a typo is an
// error rather than a setting silently ignored. A value is what the flag takes
// (a list for a repeatable flag); serve's users may be given inline as a list.
//
//	nats: tls://nats.example.com:4222
//	nats-creds: /etc/syncledger/host.creds
//	nats-ca: /etc/syncledger/ca.pem
//	ledger: prod
//	log-format: json
//	serve:
//	  listen: 0.0.0.0:4222
//	  tls-cert: /etc/syncledger/server.pem
//	consume:
//	  webhook:
//	    url: https://hooks.example.com/syncledger
//
// Precedence, per flag: the command line, then the environment, then the file,
// then the flag's default.

// configFile is a loaded configuration file.
type configFile struct {
	path string
	mode fs.FileMode
	data map[string]any
}

// configValuer is a flag value that also takes structured YAML (a list or a
// mapping) from the configuration file.
type configValuer interface {
	SetConfig(v any) error
}

// configPath returns the configuration file to read and whether it was named
// explicitly (--config, SYNCLEDGER_CONFIG); a default file that does not exist
// is no error.
func (a *app) configPath() (path string, explicit bool) {
	if a.configFile != "" {
		return a.configFile, true
	}
	dir := a.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		if home := a.getenv("HOME"); home != "" {
			dir = filepath.Join(home, ".config")
		}
	}
	if dir == "" {
		return "", false
	}
	return filepath.Join(dir, "syncledger", "config.yaml"), false
}

// loadConfig reads and checks the configuration file, if there is one.
func (a *app) loadConfig(root *cobra.Command) error {
	a.cfg = nil
	path, explicit := a.configPath()
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return usagef("configuration file: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return usagef("configuration file: %v", err)
	}
	var data map[string]any
	if err := yaml.Unmarshal(b, &data); err != nil {
		return usagef("configuration file %s: %v", path, err)
	}
	if len(data) > 0 && a.completeTree != nil {
		a.completeTree() // the file may set any command's flags
	}
	if err := checkConfigKeys(root, data, ""); err != nil {
		return usagef("configuration file %s: %v", path, err)
	}
	a.cfg = &configFile{path: path, mode: st.Mode(), data: data}
	return nil
}

// ownFlag returns the flag named name that c itself defines (not one it
// inherits), nil if none. help and version are not settings.
func ownFlag(c *cobra.Command, name string) *pflag.Flag {
	if name == "help" || name == "version" {
		return nil
	}
	return c.LocalFlags().Lookup(name)
}

func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// checkConfigKeys checks that every key of m names a flag of c or, holding a
// mapping, a subcommand of c.
func checkConfigKeys(c *cobra.Command, m map[string]any, prefix string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, key := m[k], prefix+k
		if sub := subcommand(c, k); sub != nil {
			if mm, ok := v.(map[string]any); ok {
				if err := checkConfigKeys(sub, mm, key+"."); err != nil {
					return err
				}
				continue
			}
			if ownFlag(c, k) == nil || !c.HasParent() && k == "config" {
				return fmt.Errorf("%s: the settings of %q are a mapping of its flags", key, sub.CommandPath())
			}
		}
		f := ownFlag(c, k)
		if f == nil || !c.HasParent() && k == "config" {
			return fmt.Errorf("unknown key %s: not a flag of %q nor one of its commands", key, c.CommandPath())
		}
		if err := checkConfigValue(f, v); err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
	}
	return nil
}

func checkConfigValue(f *pflag.Flag, v any) error {
	if _, ok := f.Value.(configValuer); ok {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		return errors.New("want a value, not a mapping")
	case []any:
		if _, ok := f.Value.(pflag.SliceValue); !ok {
			return errors.New("want one value, not a list")
		}
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return errors.New("want a list of values")
			}
		}
	}
	return nil
}

// configKey returns where f of cmd lives in the configuration file: the path of
// the command that defines it, and its name.
func configKey(cmd *cobra.Command, f *pflag.Flag) []string {
	c := cmd
	for c.HasParent() && c.LocalFlags().Lookup(f.Name) != f {
		c = c.Parent()
	}
	var path []string
	for ; c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	return append(path, f.Name)
}

// lookup returns the file's value for f of cmd.
func (c *configFile) lookup(cmd *cobra.Command, f *pflag.Flag) (any, string, bool) {
	key := configKey(cmd, f)
	m := c.data
	for _, seg := range key[:len(key)-1] {
		mm, ok := m[seg].(map[string]any)
		if !ok {
			return nil, "", false
		}
		m = mm
	}
	v, ok := m[key[len(key)-1]]
	return v, strings.Join(key, "."), ok && v != nil
}

// applyFile sets each flag of cmd that neither the command line nor the
// environment set from the configuration file.
func (a *app) applyFile(cmd *cobra.Command) error {
	if a.cfg == nil {
		return nil
	}
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || a.sources[f] != "" {
			return
		}
		v, key, ok := a.cfg.lookup(cmd, f)
		if !ok {
			return
		}
		if serr := setFromConfig(f, v); serr != nil {
			err = usagef("configuration file %s: %s: invalid value for --%s: %v", a.cfg.path, key, f.Name, serr)
			return
		}
		a.sources[f] = "file"
	})
	return err
}

func setFromConfig(f *pflag.Flag, v any) error {
	if cv, ok := f.Value.(configValuer); ok {
		return cv.SetConfig(v)
	}
	if list, ok := v.([]any); ok {
		strs := make([]string, len(list))
		for i, e := range list {
			strs[i] = scalar(e)
		}
		return f.Value.(pflag.SliceValue).Replace(strs)
	}
	return f.Value.Set(scalar(v))
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// isSecret reports whether f holds a secret: marked with markSecret, or named so
// (password, token, secret, seed) — flags added later are covered by their name.
func isSecret(f *pflag.Flag) bool {
	if len(f.Annotations[secretAnnotation]) > 0 {
		return true
	}
	n := strings.ToLower(f.Name)
	for _, w := range []string{"password", "token", "secret", "seed", "passphrase", "credential"} {
		if strings.Contains(n, w) && !strings.HasSuffix(n, "-file") && !strings.HasSuffix(n, "-env") {
			return true
		}
	}
	return false
}

// Redacted stands for a secret in output.
const Redacted = "REDACTED"

// redactValue returns v, a value of f, fit to print: a secret flag's value, an
// inline nkey seed or PEM key, and the credentials of URLs are replaced by
// Redacted.
func redactValue(f *pflag.Flag, v string) string {
	switch {
	case v == "":
		return ""
	case isSecret(f), isSeed(strings.TrimSpace(v)), strings.Contains(v, "-----BEGIN"), strings.Contains(v, "PRIVATE KEY"):
		return Redacted
	case f.Name == "url" && strings.Contains(v, "://"):
		// An endpoint URL (a webhook's) often carries its secret in the path.
		if u, err := url.Parse(v); err == nil {
			red := u.Scheme + "://" + u.Host
			if u.User != nil {
				red = u.Scheme + "://" + Redacted + "@" + u.Host
			}
			if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
				red += "/" + Redacted
			}
			return red
		}
		return Redacted
	case strings.Contains(v, "://"), strings.Contains(v, "@") && isURLFlag(f):
		return redactURL(v)
	}
	return v
}

// isURLFlag reports whether f takes URLs (which may carry credentials, even
// without a scheme: alice:pw@host:4222).
func isURLFlag(f *pflag.Flag) bool {
	return slices.Contains([]string{"nats", "blobs", "from", "to", "url"}, f.Name) || strings.Contains(f.Usage, "URL")
}

// warnConfigMode warns when the configuration file gives a secret and others
// may read it.
func (a *app) warnConfigMode() {
	if a.cfg == nil || a.cfg.mode.Perm()&0o077 == 0 {
		return
	}
	for f, src := range a.sources {
		if src == "file" && (isSecret(f) || isSeed(f.Value.String())) {
			a.logger.Warn("the configuration file holds a secret and other users may read it: chmod 600 it",
				"file", a.cfg.path, "mode", a.cfg.mode.Perm().String())
			return
		}
	}
}
