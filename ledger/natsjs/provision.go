package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
)

// The admin's side of expect.go: making each resource of a ledger as
// syncledger makes it — creating what is missing, changing what differs —
// where the checks only refuse. Only the admin role may (natsauth): every
// request here is a stream create, update or delete.

// Change is what Upgrade did to one resource.
type Change struct {
	// Resource is what it is, with the server's names.
	Resource string `json:"resource"`
	// Action is "created", "changed", "made anew" (a key-value bucket whose
	// settings no update changes: its keys copied), or "" when it was as
	// syncledger makes it already.
	Action string `json:"action,omitempty"`
	// Settings are the settings changed, "name: found → want".
	Settings []string `json:"settings,omitempty"`
}

// Upgrade makes every resource of the ledger as this build makes it
// (expect.go): its stream's settings, its heartbeat and swamp buckets and
// its dead-letter stream, each created if missing and changed where it
// differs; a key-value bucket with a setting no update changes (a message
// TTL once allowed, counters, memory storage) is made anew with its keys
// copied. It reports what it did to each, in order. The ledger's stream must
// exist (an error wrapping ledger.ErrNoLedger otherwise): Create makes it. A
// setting of the ledger's stream no update changes is a *ledger.ConfigError.
// Upgrade needs the admin role; running it again changes nothing.
//
// The ledger's blob store bucket, when it is a NATS object store, is
// UpgradeObjectStore's (the ledger names it in a URL this package does not
// parse).
func (l *Ledger) Upgrade(ctx context.Context) ([]Change, error) {
	js, err := jetstream.New(l.c.w, jetstream.WithDefaultTimeout(l.c.cfg.Timeout))
	if err != nil {
		return nil, err
	}
	return upgradeLedger(ctx, js, l.name)
}

func upgradeLedger(ctx context.Context, js jetstream.JetStream, name string) ([]Change, error) {
	fail := func(err error) ([]Change, error) {
		return nil, fmt.Errorf("upgrade ledger %q: %w", name, unreachable(js.Conn(), err))
	}
	st, err := js.Stream(ctx, ledger.StreamName(name))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fail(fmt.Errorf("stream %s does not exist: %w", ledger.StreamName(name), ledger.ErrNoLedger))
	}
	if err != nil {
		return fail(err)
	}
	cfg := st.CachedInfo().Config
	s, err := settingsOf(cfg)
	if err != nil {
		return fail(err)
	}
	l := &logDriver{name: name, stream: ledger.StreamName(name)}
	if err := l.identify(s); err != nil {
		return fail(err)
	}
	if err := l.notMirror(s); err != nil {
		return fail(err) // a mirror is made by mirror create, never upgraded into an origin
	}
	var out []Change
	ch, err := upgradeStream(ctx, js, ledgerStream(name), cfg)
	if err != nil {
		return fail(err)
	}
	out = append(out, ch)
	for _, r := range sideResources(name) {
		ch, err := provision(ctx, js, r, cfg.Replicas)
		if err != nil {
			return fail(err)
		}
		out = append(out, ch)
	}
	return out, nil
}

// provisionSide creates the side resources of a ledger just created
// (CreateLog), or makes existing ones so.
func provisionSide(ctx context.Context, js jetstream.JetStream, name string, replicas int) error {
	for _, r := range sideResources(name) {
		if _, err := provision(ctx, js, r, replicas); err != nil {
			return err
		}
	}
	return nil
}

// provision creates r with replicas if it does not exist, or makes it as r
// says.
func provision(ctx context.Context, js jetstream.JetStream, r resource, replicas int) (Change, error) {
	st, err := js.Stream(ctx, r.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, r.config(replicas))
		if err == nil {
			return Change{Resource: r.what, Action: "created"}, r.checkConfig(st.CachedInfo().Config)
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return Change{}, fmt.Errorf("create %s: %w", r.what, err)
		}
		st, err = js.Stream(ctx, r.stream) // created concurrently: make it so
	}
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", r.what, err)
	}
	return upgradeStream(ctx, js, r, st.CachedInfo().Config)
}

// upgradeStream makes the stream whose configuration is cfg as r says: one
// update setting each expectation that does not hold; when one no update
// changes, a bucket r may remake is made anew, and anything else is a
// *ledger.ConfigError.
func upgradeStream(ctx context.Context, js jetstream.JetStream, r resource, cfg jetstream.StreamConfig) (Change, error) {
	s, err := settingsOf(cfg)
	if err != nil {
		return Change{}, fmt.Errorf("%s: read its configuration: %w", r.what, err)
	}
	ch := Change{Resource: r.what}
	next := cfg
	for _, e := range r.expect {
		if e.holds(s) {
			continue
		}
		if e.set == nil {
			if r.remake && r.config != nil {
				return remake(ctx, js, r, cfg)
			}
			return Change{}, r.configError(e, s)
		}
		e.set(&next)
		ch.Settings = append(ch.Settings, fmt.Sprintf("%s: %s → %s", e.setting, e.found(s), e.want))
	}
	if len(ch.Settings) == 0 {
		return ch, nil
	}
	st, err := js.UpdateStream(ctx, next)
	if err != nil {
		if r.remake && r.config != nil {
			return remake(ctx, js, r, cfg)
		}
		return Change{}, fmt.Errorf("update %s (%s): %w", r.what, strings.Join(ch.Settings, ", "), err)
	}
	if err := r.checkConfig(st.CachedInfo().Config); err != nil {
		return Change{}, fmt.Errorf("after its update: %w", err)
	}
	ch.Action = "changed"
	return ch, nil
}

// remake makes a key-value bucket's stream anew with r's configuration and
// copies the last value of each of its keys (delete markers dropped): for a
// bucket with a setting no update changes. The keys are read before the
// stream is deleted; a value written between the read and the copy is lost,
// as it would be by any repair of a bucket its writers share.
func remake(ctx context.Context, js jetstream.JetStream, r resource, cfg jetstream.StreamConfig) (Change, error) {
	ch := Change{Resource: r.what, Action: "made anew"}
	old, err := r.settingsDiff(cfg)
	if err != nil {
		return Change{}, err
	}
	ch.Settings = old
	st, err := js.Stream(ctx, r.stream)
	if err != nil {
		return Change{}, fmt.Errorf("%s: %w", r.what, err)
	}
	want := r.config(cfg.Replicas)
	prefix := strings.TrimSuffix(want.Subjects[0], ">")
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return Change{}, fmt.Errorf("%s: list its keys: %w", r.what, err)
	}
	var keep []*nats.Msg
	for subj := range info.State.Subjects {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // expired meanwhile
		}
		if err != nil {
			return Change{}, fmt.Errorf("%s: read %s: %w", r.what, subj, err)
		}
		if op := m.Header.Get(kvOperation); op == "DEL" || op == "PURGE" {
			continue
		}
		keep = append(keep, &nats.Msg{Subject: m.Subject, Data: m.Data})
	}
	if err := js.DeleteStream(ctx, r.stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return Change{}, fmt.Errorf("%s: delete it to make it anew: %w", r.what, err)
	}
	nst, err := js.CreateStream(ctx, want)
	if err != nil {
		return Change{}, fmt.Errorf("%s: make it anew: %w (its %d keys were read and not yet written back)", r.what, err, len(keep))
	}
	for _, m := range keep {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return Change{}, fmt.Errorf("%s: copy %s: %w", r.what, m.Subject, err)
		}
	}
	if err := r.checkConfig(nst.CachedInfo().Config); err != nil {
		return Change{}, err
	}
	ch.Settings = append(ch.Settings, fmt.Sprintf("%d keys copied", len(keep)))
	return ch, nil
}

// settingsDiff lists the settings of cfg r wants otherwise, "name: found →
// want".
func (r resource) settingsDiff(cfg jetstream.StreamConfig) ([]string, error) {
	s, err := settingsOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: read its configuration: %w", r.what, err)
	}
	var out []string
	for _, e := range r.expect {
		if !e.holds(s) {
			out = append(out, fmt.Sprintf("%s: %s → %s", e.setting, e.found(s), e.want))
		}
	}
	return out, nil
}

// UpgradeObjectStore makes the object store bucket (a nats://BUCKET blob
// store) as syncledger makes it (expect.go objectStore: written once):
// creates it with replicas replicas if it is missing, or changes what
// differs. It needs the admin role; init, serve and upgrade run it.
func (c *Client) UpgradeObjectStore(ctx context.Context, bucket string, replicas int) (Change, error) {
	if !ledger.IsToken(bucket, 0) {
		return Change{}, fmt.Errorf("object store bucket %q: want letters, digits, '-' and '_': %w", bucket, ledger.ErrInvalid)
	}
	js, err := jetstream.New(c.w, jetstream.WithDefaultTimeout(c.cfg.Timeout))
	if err != nil {
		return Change{}, err
	}
	ch, err := provision(ctx, js, objectStore(bucket), replicas)
	return ch, unreachable(c.w, err)
}
