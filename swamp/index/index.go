package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/syncledger/syncledger/ledger"
)

// ErrUnsupported: a well-formed index object of a version this package does not
// read (swamp reads such an object as absent).
var ErrUnsupported = errors.New("unsupported swamp index version")

// Versions of the formats.
const (
	ShardVersion    = 1 // PartitionIndex.version
	MonolithVersion = 1 // DatastoreIndex.version
	MetaV1          = 1 // legacy dual-write meta; the monolith is authoritative
	MetaV2          = 2 // shard-first meta; the shards are authoritative
)

// MaxObjectSize is the largest index object (meta, shard, monolith) a caller
// should read into memory; swamp's own monoliths reach about 100 MB.
const MaxObjectSize = 1 << 30

// Entry is swamp's IndexEntry (s3_cache_sync.ts PartitionIndex/DatastoreIndex
// entries): one data file of the datastore.
type Entry struct {
	Key          string `json:"key"`                  // the rel path (bare: no namespace, no client prefix)
	Size         int64  `json:"size"`                 // bytes
	LastModified string `json:"lastModified"`         // ISO time of the upload or listing
	LocalMtime   string `json:"localMtime,omitempty"` // uploader's local mtime, for change detection
	SHA256       string `json:"sha256,omitempty"`     // lower-case hex; set by pushes, absent for discovered entries
}

// Shard is a partition's index object, _index/{partition}.json:
// {"version":1,"entries":{rel: Entry}}.
type Shard struct {
	Entries map[string]Entry
}

// Meta is _index/_meta.json: v1 {"version":1,"partitions":[…]} or v2
// {"version":2,"partitions":[…sorted],"commitSeq":N,"lastCompacted"?:ISO}.
type Meta struct {
	Version       int      // MetaV1 or MetaV2
	Partitions    []string // the listed shards
	CommitSeq     int64    // v2: bumped by every v2 commit
	LastCompacted string   // v2, optional; nothing in swamp writes it
}

// Monolith is the legacy .datastore-index.json:
// {"version":1,"lastPulled":ISO,"entries":{rel: Entry}}.
type Monolith struct {
	LastPulled string
	Entries    map[string]Entry
}

type wireEntry struct {
	Key          *string         `json:"key"`
	Size         json.RawMessage `json:"size"`
	LastModified *string         `json:"lastModified"`
	LocalMtime   *string         `json:"localMtime"`
	SHA256       *string         `json:"sha256"`
}

type wireShard struct {
	Version json.RawMessage      `json:"version"`
	Entries map[string]wireEntry `json:"entries"`
}

type wireMeta struct {
	Version       json.RawMessage `json:"version"`
	Partitions    []string        `json:"partitions"`
	CommitSeq     json.RawMessage `json:"commitSeq"`
	LastCompacted *string         `json:"lastCompacted"`
}

type wireMonolith struct {
	Version    json.RawMessage      `json:"version"`
	LastPulled *string              `json:"lastPulled"`
	Entries    map[string]wireEntry `json:"entries"`
}

func invalid(what, format string, args ...any) error {
	return fmt.Errorf("parse swamp %s: %s: %w", what, fmt.Sprintf(format, args...), ledger.ErrInvalid)
}

// decodeObject decodes one JSON object into v; trailing data is an error, unknown
// fields are not.
func decodeObject(what string, b []byte, v any) error {
	if len(b) > MaxObjectSize {
		return fmt.Errorf("parse swamp %s: %d bytes, limit %d: %w", what, len(b), MaxObjectSize, ledger.ErrTooLarge)
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return invalid(what, "not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return invalid(what, "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid(what, "trailing data after the JSON object")
	}
	return nil
}

// intLiteral parses a JSON number literal that is an integer (no fraction, no
// exponent, no quotes) in [0, max int64].
func intLiteral(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// checkText rejects empty strings, invalid UTF-8 and control characters.
func checkText(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case !utf8.ValidString(s):
		return errors.New("not UTF-8")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("control byte 0x%02x", c)
		}
	}
	return nil
}

// ValidateRel checks a rel path as this package accepts it: non-empty UTF-8
// without control characters. (Whether the ledger accepts it is
// ledger.ValidatePath's business.)
func ValidateRel(rel string) error {
	if err := checkText(rel); err != nil {
		return fmt.Errorf("rel path %q: %v: %w", clip(rel), err, ledger.ErrInvalid)
	}
	return nil
}

// ValidatePartition checks a partition key: a valid rel without "/", so that
// _index/{key}.json is one object key.
func ValidatePartition(p string) error {
	if err := checkText(p); err != nil {
		return fmt.Errorf("partition key %q: %v: %w", clip(p), err, ledger.ErrInvalid)
	}
	if strings.ContainsAny(p, "/\\") || p == "." || p == ".." {
		return fmt.Errorf("partition key %q: not one path segment: %w", clip(p), ledger.ErrInvalid)
	}
	return nil
}

// NormalizeSHA256 returns s in lower case if it is 64 hex digits; "" stays "".
func NormalizeSHA256(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	l := strings.ToLower(s)
	if _, err := ledger.ParseDigest(l); err != nil {
		return "", fmt.Errorf("sha256 %q: %w", clip(s), ledger.ErrInvalid)
	}
	return l, nil
}

func parseEntries(what string, w map[string]wireEntry) (map[string]Entry, error) {
	if w == nil {
		return nil, invalid(what, `no "entries" object`)
	}
	out := make(map[string]Entry, len(w))
	for rel, we := range w {
		if err := ValidateRel(rel); err != nil {
			return nil, fmt.Errorf("parse swamp %s: %w", what, err)
		}
		e := Entry{Key: rel}
		if we.Key != nil && *we.Key != rel {
			return nil, invalid(what, "entry %q has key %q", clip(rel), clip(*we.Key))
		}
		n, ok := intLiteral(we.Size)
		if !ok {
			return nil, invalid(what, "entry %q: size %s is not an integer ≥ 0", clip(rel), clip(string(we.Size)))
		}
		e.Size = n
		if we.LastModified != nil {
			e.LastModified = *we.LastModified
		}
		if we.LocalMtime != nil {
			e.LocalMtime = *we.LocalMtime
		}
		if we.SHA256 != nil {
			h, err := NormalizeSHA256(*we.SHA256)
			if err != nil {
				return nil, fmt.Errorf("parse swamp %s: entry %q: %w", what, clip(rel), err)
			}
			e.SHA256 = h
		}
		out[rel] = e
	}
	return out, nil
}

func checkVersion(what string, raw json.RawMessage, want ...int) (int, error) {
	if raw == nil {
		return 0, invalid(what, `no "version"`)
	}
	v, ok := intLiteral(raw)
	if !ok {
		return 0, invalid(what, "version %s is not an integer", clip(string(raw)))
	}
	if v > 1<<20 || !slices.Contains(want, int(v)) {
		return int(v), fmt.Errorf("parse swamp %s: version %d: %w", what, v, ErrUnsupported)
	}
	return int(v), nil
}

// ParseShard parses a shard object (_index/{partition}.json).
func ParseShard(b []byte) (Shard, error) {
	var w wireShard
	if err := decodeObject("shard", b, &w); err != nil {
		return Shard{}, err
	}
	if _, err := checkVersion("shard", w.Version, ShardVersion); err != nil {
		return Shard{}, err
	}
	es, err := parseEntries("shard", w.Entries)
	if err != nil {
		return Shard{}, err
	}
	return Shard{Entries: es}, nil
}

// ParseMonolith parses the legacy monolithic index (.datastore-index.json).
func ParseMonolith(b []byte) (Monolith, error) {
	var w wireMonolith
	if err := decodeObject("monolith", b, &w); err != nil {
		return Monolith{}, err
	}
	if _, err := checkVersion("monolith", w.Version, MonolithVersion); err != nil {
		return Monolith{}, err
	}
	es, err := parseEntries("monolith", w.Entries)
	if err != nil {
		return Monolith{}, err
	}
	m := Monolith{Entries: es}
	if w.LastPulled != nil {
		m.LastPulled = *w.LastPulled
	}
	return m, nil
}

// ParseMeta parses _index/_meta.json. Duplicate partitions are dropped (swamp
// would only read the shard twice).
func ParseMeta(b []byte) (Meta, error) {
	var w wireMeta
	if err := decodeObject("meta", b, &w); err != nil {
		return Meta{}, err
	}
	v, err := checkVersion("meta", w.Version, MetaV1, MetaV2)
	if err != nil {
		return Meta{}, err
	}
	if w.Partitions == nil {
		return Meta{}, invalid("meta", `no "partitions" array`)
	}
	m := Meta{Version: v, Partitions: make([]string, 0, len(w.Partitions))}
	seen := make(map[string]bool, len(w.Partitions))
	for _, p := range w.Partitions {
		if err := ValidatePartition(p); err != nil {
			return Meta{}, fmt.Errorf("parse swamp meta: %w", err)
		}
		if !seen[p] {
			seen[p] = true
			m.Partitions = append(m.Partitions, p)
		}
	}
	if v == MetaV2 {
		n, ok := intLiteral(w.CommitSeq)
		if !ok {
			return Meta{}, invalid("meta", "v2 commitSeq %s is not an integer ≥ 0", clip(string(w.CommitSeq)))
		}
		m.CommitSeq = n
		if w.LastCompacted != nil {
			m.LastCompacted = *w.LastCompacted
		}
	}
	return m, nil
}

func checkEntries(what string, es map[string]Entry) error {
	for rel, e := range es {
		if err := ValidateRel(rel); err != nil {
			return fmt.Errorf("encode swamp %s: %w", what, err)
		}
		if e.Key != rel {
			return fmt.Errorf("encode swamp %s: entry %q has key %q: %w", what, clip(rel), clip(e.Key), ledger.ErrInvalid)
		}
		if e.Size < 0 {
			return fmt.Errorf("encode swamp %s: entry %q: negative size: %w", what, clip(rel), ledger.ErrInvalid)
		}
		if h, err := NormalizeSHA256(e.SHA256); err != nil || h != e.SHA256 {
			return fmt.Errorf("encode swamp %s: entry %q: sha256 %q is not lower-case hex: %w", what, clip(rel), clip(e.SHA256), ledger.ErrInvalid)
		}
	}
	return nil
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EncodeShard returns a shard object as swamp writes it (entries in key order).
func EncodeShard(s Shard) ([]byte, error) {
	es := s.Entries
	if es == nil {
		es = map[string]Entry{}
	}
	if err := checkEntries("shard", es); err != nil {
		return nil, err
	}
	return marshal(struct {
		Version int              `json:"version"`
		Entries map[string]Entry `json:"entries"`
	}{ShardVersion, es})
}

// EncodeMonolith returns a monolithic index object.
func EncodeMonolith(m Monolith) ([]byte, error) {
	es := m.Entries
	if es == nil {
		es = map[string]Entry{}
	}
	if err := checkEntries("monolith", es); err != nil {
		return nil, err
	}
	return marshal(struct {
		Version    int              `json:"version"`
		LastPulled string           `json:"lastPulled"`
		Entries    map[string]Entry `json:"entries"`
	}{MonolithVersion, m.LastPulled, es})
}

// EncodeMeta returns a meta object; a v2 meta's partitions are written sorted,
// as swamp writes them.
func EncodeMeta(m Meta) ([]byte, error) {
	parts := slices.Clone(m.Partitions)
	if parts == nil {
		parts = []string{}
	}
	for _, p := range parts {
		if err := ValidatePartition(p); err != nil {
			return nil, fmt.Errorf("encode swamp meta: %w", err)
		}
	}
	switch m.Version {
	case MetaV1:
		return marshal(struct {
			Version    int      `json:"version"`
			Partitions []string `json:"partitions"`
		}{MetaV1, parts})
	case MetaV2:
		if m.CommitSeq < 0 {
			return nil, fmt.Errorf("encode swamp meta: negative commitSeq: %w", ledger.ErrInvalid)
		}
		slices.Sort(parts)
		parts = slices.Compact(parts)
		return marshal(struct {
			Version       int      `json:"version"`
			Partitions    []string `json:"partitions"`
			CommitSeq     int64    `json:"commitSeq"`
			LastCompacted string   `json:"lastCompacted,omitempty"`
		}{MetaV2, parts, m.CommitSeq, m.LastCompacted})
	default:
		return nil, fmt.Errorf("encode swamp meta: version %d: %w", m.Version, ErrUnsupported)
	}
}

// FormatTime formats t as JavaScript's Date.toISOString does (UTC, milliseconds),
// the form of swamp's lastModified.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
