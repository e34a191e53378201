package natsjs

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
)

// What syncledger keeps on a server, each resource with the configuration it
// is created with and the settings a process checks when it opens it, in one
// place. Opening a resource whose settings differ fails with a
// *ledger.ConfigError naming the resource, the setting, what was found and
// wanted, and the admin command that makes it so — before the process trusts
// it with anything. Harden a setting here: creation, the check and the
// upgrade (Ledger.Upgrade) change together, since each expectation says how
// it is set. The checks read the stream info that opening reads anyway (the
// ledger stream's STREAM.INFO; a bucket's, caught as nats.go's KeyValue reads
// it): no request of their own.
//
//	resource                       created by (the admin only)          checked by
//	the ledger's stream            init, serve, swamp setup (namespace) Ledger.Log, Create, Feed
//	the heartbeat bucket           with the ledger; upgrade             every open of it
//	the swamp bucket               with the ledger; upgrade             every open of it
//	the dead-letter stream         with the ledger; upgrade             Feed (its first dead letter, subscribe)
//	the object store bucket        init's probe, serve, upgrade         Client.ObjectStore
//	a durable consumer             consume create (or an admin's consume) Feed.Subscribe
//
// Nothing below the admin creates or changes one (natsauth grants no role
// below it a stream create or update, nor a consumer create), so a resource
// made first by someone else, with settings of their choosing, is what
// these checks exist for: the process refuses it, and `syncledger upgrade`
// (Ledger.Upgrade) makes it so. Every stream refuses what would let a writer
// remove what it does not own or make it expire: roll-ups (Nats-Rollup, a
// purge by publish), per-message TTLs, counters, schedules, and batches where
// none is needed. Deletes of a key-value bucket's keys are markers published
// on the key (no roll-up needed), and purges go through the admin's API.

// Repairs the errors name.
const (
	repairUpgrade  = "run syncledger upgrade as an admin: it makes it so"
	repairCreate   = "run syncledger upgrade as an admin: it creates it"
	repairRemake   = "run syncledger upgrade as an admin: no update changes this setting, so it makes the bucket anew and copies its keys"
	repairNoUpdate = "no update changes this setting (syncledger upgrade reports it): move the data to a resource made by syncledger, see docs/ops.md, Upgrading"
)

// streamSettings is the part of a stream's configuration the checks read,
// under the server's names: a STREAM.INFO answer's "config" decodes into it.
type streamSettings struct {
	Name                   string            `json:"name"`
	Subjects               []string          `json:"subjects"`
	Retention              string            `json:"retention"`
	MaxConsumers           int               `json:"max_consumers"`
	MaxMsgs                int64             `json:"max_msgs"`
	MaxBytes               int64             `json:"max_bytes"`
	MaxAge                 time.Duration     `json:"max_age"`
	MaxMsgsPerSubject      int64             `json:"max_msgs_per_subject"`
	MaxMsgSize             int32             `json:"max_msg_size"`
	Storage                string            `json:"storage"`
	Replicas               int               `json:"num_replicas"`
	Sealed                 bool              `json:"sealed"`
	DenyDelete             bool              `json:"deny_delete"`
	DenyPurge              bool              `json:"deny_purge"`
	AllowRollup            bool              `json:"allow_rollup_hdrs"`
	AllowDirect            bool              `json:"allow_direct"`
	AllowAtomicPublish     bool              `json:"allow_atomic"`
	AllowBatchPublish      bool              `json:"allow_batched"`
	AllowMsgTTL            bool              `json:"allow_msg_ttl"`
	SubjectDeleteMarkerTTL time.Duration     `json:"subject_delete_marker_ttl"`
	AllowMsgCounter        bool              `json:"allow_msg_counter"`
	AllowMsgSchedules      bool              `json:"allow_msg_schedules"`
	PersistMode            string            `json:"persist_mode"`
	Mirror                 json.RawMessage   `json:"mirror,omitempty"`
	Sources                json.RawMessage   `json:"sources,omitempty"`
	SubjectTransform       json.RawMessage   `json:"subject_transform,omitempty"`
	RePublish              json.RawMessage   `json:"republish,omitempty"`
	Metadata               map[string]string `json:"metadata"`
}

// rePublish is a stream's republish setting, under the server's names.
type rePublish struct {
	Source      string `json:"src"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only"`
}

// settingsOf returns c's settings as the server states them.
func settingsOf(c jetstream.StreamConfig) (*streamSettings, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var s streamSettings
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// expectation is one setting a resource must have.
type expectation struct {
	setting string // the server's name of it
	want    string
	found   func(*streamSettings) string
	holds   func(*streamSettings) bool
	// set makes it hold on a configuration an update sends; nil when the
	// server changes the setting in no update (a message TTL once allowed, a
	// mirror, the storage).
	set func(*jetstream.StreamConfig)
	// absentOK: a resource made before this release may lack the setting
	// altogether (absent reports that) and still be used, the way the
	// release that made it used it, until the admin's upgrade sets it; a
	// value other than the one wanted is still refused.
	absent func(*streamSettings) bool
}

// resource is a stream syncledger keeps: what it is, how it is made, the
// settings it must have.
type resource struct {
	what   string // "ledger \"x\" (stream SYNCLEDGER_x)"
	stream string
	// config is the configuration it is created with (replicas: the
	// ledger's); nil for the ledger's stream, which CreateLog makes with the
	// ledger's own settings.
	config func(replicas int) jetstream.StreamConfig
	// remake: a setting no update changes is repaired by making the stream
	// anew and copying what it holds (a key-value bucket's keys).
	remake bool
	expect []expectation
}

// check returns a *ledger.ConfigError for the first setting s lacks.
func (r resource) check(s *streamSettings) error {
	for _, e := range r.expect {
		if !e.holds(s) && (e.absent == nil || !e.absent(s)) {
			return r.configError(e, s)
		}
	}
	return nil
}

func (r resource) configError(e expectation, s *streamSettings) *ledger.ConfigError {
	repair := repairUpgrade
	switch {
	case e.set == nil && r.remake:
		repair = repairRemake
	case e.set == nil:
		repair = repairNoUpdate
	}
	return &ledger.ConfigError{Resource: r.what, Setting: e.setting, Found: e.found(s), Want: e.want, Repair: repair}
}

// missing is the error of a resource that does not exist.
func (r resource) missing() *ledger.ConfigError {
	return &ledger.ConfigError{Resource: r.what, Setting: "the stream", Found: "missing", Want: "one made by an admin", Repair: repairCreate}
}

// checkConfig is check on a configuration as nats.go decodes it.
func (r resource) checkConfig(c jetstream.StreamConfig) error {
	s, err := settingsOf(c)
	if err != nil {
		return fmt.Errorf("%s: read its configuration: %w", r.what, err)
	}
	return r.check(s)
}

// The kinds of expectation.

func subjectsExactly(subjects ...string) expectation {
	want := slices.Clone(subjects)
	slices.Sort(want)
	return expectation{
		setting: "subjects", want: strings.Join(want, " "),
		found: func(s *streamSettings) string { return strings.Join(s.Subjects, " ") },
		holds: func(s *streamSettings) bool {
			got := slices.Clone(s.Subjects)
			slices.Sort(got)
			return slices.Equal(got, want)
		},
		set: func(c *jetstream.StreamConfig) { c.Subjects = slices.Clone(subjects) },
	}
}

func boolIs(setting string, want bool, get func(*streamSettings) bool, set func(*jetstream.StreamConfig, bool)) expectation {
	e := expectation{
		setting: setting, want: fmt.Sprint(want),
		found: func(s *streamSettings) string { return fmt.Sprint(get(s)) },
		holds: func(s *streamSettings) bool { return get(s) == want },
	}
	if set != nil {
		e.set = func(c *jetstream.StreamConfig) { set(c, want) }
	}
	return e
}

// unlimited: no limit (the server states none as -1; 0 means none too).
func unlimited[T int | int32 | int64](setting string, get func(*streamSettings) T, set func(*jetstream.StreamConfig)) expectation {
	return expectation{
		setting: setting, want: "no limit (-1)",
		found: func(s *streamSettings) string { return fmt.Sprint(get(s)) },
		holds: func(s *streamSettings) bool { return get(s) <= 0 },
		set:   set,
	}
}

// none: an optional part of the configuration (a mirror, sources, a
// republish) that must be absent.
func none(setting, want string, get func(*streamSettings) json.RawMessage, set func(*jetstream.StreamConfig)) expectation {
	return expectation{
		setting: setting, want: want,
		found: func(s *streamSettings) string { return string(get(s)) },
		holds: func(s *streamSettings) bool {
			v := get(s)
			return len(v) == 0 || string(v) == "null" || string(v) == "[]"
		},
		set: set,
	}
}

func noMaxAge() expectation {
	return expectation{
		setting: "max_age", want: "0 (kept until purged)",
		found: func(s *streamSettings) string { return s.MaxAge.String() },
		holds: func(s *streamSettings) bool { return s.MaxAge == 0 },
		set:   func(c *jetstream.StreamConfig) { c.MaxAge = 0 },
	}
}

// common are the settings every stream of a ledger has: a stream of its own
// on file, kept as written, which refuses every header that would let a
// writer remove or expire what it does not own.
func common() []expectation {
	return []expectation{
		none("mirror", "none (a stream of its own)", func(s *streamSettings) json.RawMessage { return s.Mirror }, nil),
		none("sources", "none", func(s *streamSettings) json.RawMessage { return s.Sources }, func(c *jetstream.StreamConfig) { c.Sources = nil }),
		none("subject_transform", "none", func(s *streamSettings) json.RawMessage { return s.SubjectTransform }, func(c *jetstream.StreamConfig) { c.SubjectTransform = nil }),
		boolIs("sealed", false, func(s *streamSettings) bool { return s.Sealed }, nil),
		{
			setting: "storage", want: "file",
			found: func(s *streamSettings) string { return s.Storage },
			holds: func(s *streamSettings) bool { return s.Storage == "file" },
		},
		{
			setting: "retention", want: "limits",
			found: func(s *streamSettings) string { return s.Retention },
			holds: func(s *streamSettings) bool { return s.Retention == "limits" },
			set:   func(c *jetstream.StreamConfig) { c.Retention = jetstream.LimitsPolicy },
		},
		{
			setting: "persist_mode", want: "default (stored before it is acknowledged)",
			found: func(s *streamSettings) string { return s.PersistMode },
			holds: func(s *streamSettings) bool { return s.PersistMode == "" || s.PersistMode == "default" },
		},
		unlimited("max_msgs", func(s *streamSettings) int64 { return s.MaxMsgs }, func(c *jetstream.StreamConfig) { c.MaxMsgs = -1 }),
		unlimited("max_bytes", func(s *streamSettings) int64 { return s.MaxBytes }, func(c *jetstream.StreamConfig) { c.MaxBytes = -1 }),
		unlimited("max_msg_size", func(s *streamSettings) int32 { return s.MaxMsgSize }, func(c *jetstream.StreamConfig) { c.MaxMsgSize = -1 }),
		unlimited("max_consumers", func(s *streamSettings) int { return s.MaxConsumers }, func(c *jetstream.StreamConfig) { c.MaxConsumers = -1 }),
		boolIs("deny_delete", true, func(s *streamSettings) bool { return s.DenyDelete }, func(c *jetstream.StreamConfig, v bool) { c.DenyDelete = v }),
		boolIs("allow_rollup_hdrs", false, func(s *streamSettings) bool { return s.AllowRollup }, func(c *jetstream.StreamConfig, v bool) { c.AllowRollup = v }),
		boolIs("allow_msg_ttl", false, func(s *streamSettings) bool { return s.AllowMsgTTL }, nil),
		{
			setting: "subject_delete_marker_ttl", want: "0 (none)",
			found: func(s *streamSettings) string { return s.SubjectDeleteMarkerTTL.String() },
			holds: func(s *streamSettings) bool { return s.SubjectDeleteMarkerTTL == 0 },
			set:   func(c *jetstream.StreamConfig) { c.SubjectDeleteMarkerTTL = 0 },
		},
		boolIs("allow_msg_counter", false, func(s *streamSettings) bool { return s.AllowMsgCounter }, nil),
		boolIs("allow_msg_schedules", false, func(s *streamSettings) bool { return s.AllowMsgSchedules }, nil),
		boolIs("allow_batched", false, func(s *streamSettings) bool { return s.AllowBatchPublish }, func(c *jetstream.StreamConfig, v bool) { c.AllowBatchPublish = v }),
	}
}

func allowDirect() expectation {
	return boolIs("allow_direct", true, func(s *streamSettings) bool { return s.AllowDirect }, func(c *jetstream.StreamConfig, v bool) { c.AllowDirect = v })
}

func atomicPublish(want bool) expectation {
	return boolIs("allow_atomic", want, func(s *streamSettings) bool { return s.AllowAtomicPublish }, func(c *jetstream.StreamConfig, v bool) { c.AllowAtomicPublish = v })
}

// ledgerRePublish is the republish of a ledger's stream: the server sends
// each message it stores, once stored, headers and body, to
// syncledger.<ledger>.stored.<token> (StoredPrefix), with the headers it
// adds — Nats-Stream, Nats-Subject (the stored subject), Nats-Sequence (its
// seq), Nats-Time-Stamp and Nats-Last-Sequence (the seq of the previous
// message on the same subject: a partition's, its event's Prev). Followers
// subscribe there instead of holding a consumer (read.go Follow). Only the
// stream leader republishes, and a subscriber that is slow or reconnecting
// loses what was sent meanwhile: a follower checks the seqs for contiguity
// and reads what it missed by direct gets. Whole messages, not headers only:
// a follower then reads nothing per commit (the server sends one message to
// every follower), where headers only would cost every follower a direct get
// of every event.
//
// It is the one place the setting is spelled: Create makes a ledger with it,
// Open checks it (ledgerStream), and the admin's upgrade sets it on a ledger
// made without it (Ledger.Upgrade; Ledger.RePublish alone).
func ledgerRePublish(name string) *jetstream.RePublish {
	return &jetstream.RePublish{Source: ledger.SubjectPrefix(name) + ">", Destination: StoredSubjects(name)}
}

// republishes: the stream republishes as ledgerRePublish says.
func republishes(name string) expectation {
	want := ledgerRePublish(name)
	show := func(r *rePublish) string {
		if r == nil {
			return "none"
		}
		s := r.Source + " → " + r.Destination
		if r.HeadersOnly {
			s += " (headers only)"
		}
		return s
	}
	decode := func(s *streamSettings) *rePublish {
		var r *rePublish
		if len(s.RePublish) > 0 && json.Unmarshal(s.RePublish, &r) != nil {
			return &rePublish{Source: "(undecodable)"}
		}
		return r
	}
	return expectation{
		setting: "republish",
		want:    show(&rePublish{Source: want.Source, Destination: want.Destination}),
		found:   func(s *streamSettings) string { return show(decode(s)) },
		holds: func(s *streamSettings) bool {
			r := decode(s)
			return r != nil && r.Source == want.Source && r.Destination == want.Destination && !r.HeadersOnly
		},
		set:    func(c *jetstream.StreamConfig) { c.RePublish = ledgerRePublish(name) },
		absent: func(s *streamSettings) bool { return decode(s) == nil },
	}
}

// A ledger made without its republish (by the release before it) is still
// opened — its hosts of this release sync, commit and follow during a
// rolling upgrade, a follower reading the head every followTick instead of
// hearing the republish (Log.republish false) — and a republish other than
// this one is refused.
//
// RePublishRepair is how a ledger made without its republish (before this
// release) gets it: the admin's upgrade (or init) adds it to the existing
// stream, changing nothing else.
const RePublishRepair = repairUpgrade

// noRePublish: nothing a side stream stores is sent on to other subjects (a
// subscriber there would read the swamp bucket's control plane).
func noRePublish() expectation {
	return none("republish", "none", func(s *streamSettings) json.RawMessage { return s.RePublish }, func(c *jetstream.StreamConfig) { c.RePublish = nil })
}

// The resources.

// ledgerStream is a ledger's stream (Create's streamConfig). Its identity —
// the metadata, the format, the lineage — Log.adopt checks first. MaxAge is
// the ledger's own setting (LedgerConfig.MaxAge), and replicas are the
// operator's. Purges stay allowed (deny_purge false): retention and
// quarantine purge through the admin's API.
func ledgerStream(name string) resource {
	return resource{
		what:   fmt.Sprintf("ledger %q (stream %s)", name, ledger.StreamName(name)),
		stream: ledger.StreamName(name),
		expect: append([]expectation{
			subjectsExactly(ledger.SubjectPrefix(name) + ">"),
			unlimited("max_msgs_per_subject", func(s *streamSettings) int64 { return s.MaxMsgsPerSubject }, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = -1 }),
			atomicPublish(true),
			allowDirect(),
			boolIs("deny_purge", false, func(s *streamSettings) bool { return s.DenyPurge }, nil),
			republishes(name),
		}, common()...),
	}
}

// kvStreamConfig is the stream of a side bucket: nats.go's key-value layout
// (subjects $KV.<bucket>.<key>, one value per key, direct gets) on file,
// with the ledger stream's replicas, and without roll-ups: nats.go creates
// its buckets allowing them (a key's purge is a roll-up), which lets any
// writer of one key purge every other with one header.
func kvStreamConfig(bucket, description string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              KVStream(bucket),
		Description:       description,
		Subjects:          []string{KVSubjectPrefix + bucket + ".>"},
		Retention:         jetstream.LimitsPolicy,
		MaxConsumers:      -1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: 1,
		MaxMsgSize:        -1,
		Discard:           jetstream.DiscardNew,
		Storage:           jetstream.FileStorage,
		Replicas:          max(replicas, 1),
		Duplicates:        DuplicateWindow,
		DenyDelete:        true,
		AllowDirect:       true,
	}
}

// kvDescription is a side bucket's description.
func kvDescription(ledgerName, bucket string) string {
	switch bucket {
	case HeartbeatBucket(ledgerName):
		return "syncledger host heartbeats of ledger " + ledgerName
	case SwampBucket(ledgerName):
		return "syncledger swamp locks and control plane of ledger " + ledgerName
	}
	return "syncledger bucket of ledger " + ledgerName
}

// kvBucket is a side bucket's stream, as kvStreamConfig makes it.
func kvBucket(ledgerName, bucket string) resource {
	return resource{
		what:   fmt.Sprintf("bucket %s of ledger %q (stream %s)", bucket, ledgerName, KVStream(bucket)),
		stream: KVStream(bucket),
		config: func(replicas int) jetstream.StreamConfig {
			return kvStreamConfig(bucket, kvDescription(ledgerName, bucket), replicas)
		},
		remake: true,
		expect: append([]expectation{
			subjectsExactly(KVSubjectPrefix + bucket + ".>"),
			{
				setting: "max_msgs_per_subject", want: "1",
				found: func(s *streamSettings) string { return fmt.Sprint(s.MaxMsgsPerSubject) },
				holds: func(s *streamSettings) bool { return s.MaxMsgsPerSubject == 1 },
				set:   func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 },
			},
			noMaxAge(),
			atomicPublish(false),
			allowDirect(),
			noRePublish(),
		}, common()...),
	}
}

// deadLetterConfig is the configuration of a ledger's dead-letter stream.
// Direct gets list it without a consumer.
func deadLetterConfig(ledgerName string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:         DeadLetterStream(ledgerName),
		Description:  "syncledger dead letters of ledger " + ledgerName,
		Subjects:     []string{DeadLetterSubject(ledgerName, ">")},
		Retention:    jetstream.LimitsPolicy,
		Discard:      jetstream.DiscardOld,
		MaxConsumers: -1,
		MaxMsgs:      -1,
		MaxBytes:     -1,
		MaxMsgSize:   -1,
		Storage:      jetstream.FileStorage,
		Replicas:     max(replicas, 1),
		Duplicates:   DuplicateWindow,
		DenyDelete:   true,
		AllowDirect:  true,
	}
}

// deadLetterStream is a ledger's dead-letter stream, as deadLetterConfig
// makes it: its subjects exactly (a stream binding others would capture
// them).
func deadLetterStream(ledgerName string) resource {
	return resource{
		what:   fmt.Sprintf("the dead letters of ledger %q (stream %s)", ledgerName, DeadLetterStream(ledgerName)),
		stream: DeadLetterStream(ledgerName),
		config: func(replicas int) jetstream.StreamConfig { return deadLetterConfig(ledgerName, replicas) },
		expect: append([]expectation{
			subjectsExactly(DeadLetterSubject(ledgerName, ">")),
			noMaxAge(),
			atomicPublish(false),
			// Direct gets are not required: DeadLetters reads one made
			// without them (the previous release's) by leader gets.
			noRePublish(),
		}, common()...),
	}
}

// objectStore is a nats:// blob store's bucket, as natsblob.StreamConfig
// makes it: written once.
func objectStore(bucket string) resource {
	return resource{
		what:   fmt.Sprintf("object store bucket %s (stream %s)", bucket, natsblob.StreamName(bucket)),
		stream: natsblob.StreamName(bucket),
		config: func(replicas int) jetstream.StreamConfig { return natsblob.StreamConfig(bucket, replicas) },
		expect: append([]expectation{
			subjectsExactly(natsblob.ChunkSubjects(bucket), natsblob.MetaSubjects(bucket)),
			unlimited("max_msgs_per_subject", func(s *streamSettings) int64 { return s.MaxMsgsPerSubject }, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = -1 }),
			noMaxAge(),
			atomicPublish(false),
			allowDirect(),
			noRePublish(),
		}, common()...),
	}
}

// sideResources are the streams of a ledger besides its own, in the order
// Upgrade makes them.
func sideResources(ledgerName string) []resource {
	return []resource{
		kvBucket(ledgerName, HeartbeatBucket(ledgerName)),
		kvBucket(ledgerName, SwampBucket(ledgerName)),
		deadLetterStream(ledgerName),
	}
}

// consumerExpect is what a durable consumer of the ledger's stream must be,
// as Feed.Create makes it (Feed.consumerConfig): marked as syncledger's, a
// pull consumer acknowledging all up to a seq, delivering whole messages,
// never dropped for idleness nor given up by the server after some attempts
// (the Runner counts attempts and dead-letters). Its filter is checked
// against the one asked for (ledger.FilterError).
func consumerExpect(ledgerName, name string) consumerCheck {
	return consumerCheck{
		what: fmt.Sprintf("consumer %q of ledger %q (stream %s)", name, ledgerName, ledger.StreamName(ledgerName)),
		repair: fmt.Sprintf("an admin makes it again: syncledger consume delete %s, then syncledger consume create %s"+
			" with its partitions and --start the seq after the last one it handled", name, name),
		expect: []consumerSetting{
			{"metadata " + metaConsumer + " (made by syncledger)", name, func(c *jetstream.ConsumerConfig) string { return c.Metadata[metaConsumer] }},
			{"durable_name", name, func(c *jetstream.ConsumerConfig) string { return c.Durable }},
			{"ack_policy", jetstream.AckAllPolicy.String(), func(c *jetstream.ConsumerConfig) string { return c.AckPolicy.String() }},
			{"deliver_subject", "none (a pull consumer)", func(c *jetstream.ConsumerConfig) string {
				return cmpOr(c.DeliverSubject, "none (a pull consumer)")
			}},
			{"headers_only", "false", func(c *jetstream.ConsumerConfig) string { return fmt.Sprint(c.HeadersOnly) }},
			{"inactive_threshold", "0s", func(c *jetstream.ConsumerConfig) string { return c.InactiveThreshold.String() }},
			{"max_deliver", "-1", func(c *jetstream.ConsumerConfig) string {
				if c.MaxDeliver <= 0 {
					return "-1"
				}
				return fmt.Sprint(c.MaxDeliver)
			}},
		},
	}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// consumerCheck is the settings a durable consumer must have.
type consumerCheck struct {
	what, repair string
	expect       []consumerSetting
}

type consumerSetting struct {
	setting, want string
	found         func(*jetstream.ConsumerConfig) string
}

// check returns a *ledger.ConfigError for the first setting c lacks.
func (k consumerCheck) check(c jetstream.ConsumerConfig) error {
	for _, e := range k.expect {
		if got := e.found(&c); got != e.want {
			return &ledger.ConfigError{Resource: k.what, Setting: e.setting, Found: got, Want: e.want, Repair: k.repair}
		}
	}
	return nil
}
