package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Limits on decoded input.
const (
	MaxEventSize   = 1 << 20 // bytes of one encoded event (JetStream's default max payload)
	MaxInlineSize  = 256 << 10
	MaxMessageLen  = 64 << 10
	MaxHostLen     = 256
	MaxManifestLen = 512 << 20 // bytes of one manifest blob
	// MaxTokenLen bounds a partition's escaped subject token, so that every
	// subject stays well inside NATS's control-line limit (4 KiB).
	MaxTokenLen = 2048
)

type wireEntry struct {
	Path    string  `json:"path"`
	SHA256  *Digest `json:"sha256,omitempty"`
	Size    *int64  `json:"size,omitempty"`
	Mode    *uint32 `json:"mode,omitempty"`
	Deleted bool    `json:"deleted,omitempty"`
}

type wireEvent struct {
	V         int         `json:"v"`
	Ledger    string      `json:"ledger"`
	Commit    string      `json:"commit"`
	Host      string      `json:"host"`
	At        time.Time   `json:"at"`
	Message   string      `json:"message,omitempty"`
	Partition string      `json:"partition"`
	ModelSeq  uint64      `json:"modelSeq"`
	Prev      Seq         `json:"prev"`
	Parts     int         `json:"parts"`
	Part      int         `json:"part"`
	Entries   []wireEntry `json:"entries,omitempty"`
	Manifest  *Digest     `json:"manifest,omitempty"`
}

type wireManifest struct {
	V       int         `json:"v"`
	Entries []wireEntry `json:"entries"`
}

func toWire(es []Entry) []wireEntry {
	out := make([]wireEntry, len(es))
	for i, e := range es {
		out[i] = wireEntry{Path: e.Path, Deleted: e.Deleted}
		if !e.Deleted {
			d, size, mode := e.SHA256, e.Size, e.Mode
			out[i].SHA256, out[i].Size, out[i].Mode = &d, &size, &mode
		}
	}
	return out
}

func fromWire(ws []wireEntry) ([]Entry, error) {
	out := make([]Entry, len(ws))
	seen := make(map[string]bool, len(ws))
	for i, w := range ws {
		if err := ValidatePath(w.Path); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if seen[w.Path] {
			return nil, fmt.Errorf("entry %d: duplicate path %q: %w", i, w.Path, ErrInvalid)
		}
		seen[w.Path] = true
		e := Entry{Path: w.Path, Deleted: w.Deleted}
		if w.Deleted {
			if w.SHA256 != nil || w.Size != nil || w.Mode != nil {
				return nil, fmt.Errorf("entry %d (%q): deletion with content fields: %w", i, w.Path, ErrInvalid)
			}
		} else {
			if w.SHA256 == nil || w.Size == nil || w.Mode == nil {
				return nil, fmt.Errorf("entry %d (%q): write needs sha256, size and mode: %w", i, w.Path, ErrInvalid)
			}
			e.SHA256, e.Size, e.Mode = *w.SHA256, *w.Size, *w.Mode
			if e.Size < 0 {
				return nil, fmt.Errorf("entry %d (%q): negative size: %w", i, w.Path, ErrInvalid)
			}
			if e.Mode&^0o777 != 0 {
				return nil, fmt.Errorf("entry %d (%q): mode %#o beyond permission bits: %w", i, w.Path, e.Mode, ErrInvalid)
			}
		}
		out[i] = e
	}
	return out, nil
}

// ValidateEvent checks an event's fields (everything DecodeEvent checks after
// parsing). EncodeEvent refuses what it rejects, so the log never holds an event
// this code would not read.
func ValidateEvent(e Event) error {
	if err := validateHeader(e); err != nil {
		return err
	}
	if err := validateEntries(e.Entries); err != nil {
		return fmt.Errorf("invalid event: %w", err)
	}
	return CheckEntriesPartition(e.Partition, e.Entries)
}

// validateEntries checks entries as fromWire checks their wire form (a deletion's
// content fields are not on the wire, so they are not checked), without
// building it: the same rules and messages, no allocation for a single entry.
func validateEntries(es []Entry) error {
	var seen map[string]bool
	if len(es) > 1 {
		seen = make(map[string]bool, len(es))
	}
	for i, e := range es {
		if err := ValidatePath(e.Path); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if seen != nil {
			if seen[e.Path] {
				return fmt.Errorf("entry %d: duplicate path %q: %w", i, e.Path, ErrInvalid)
			}
			seen[e.Path] = true
		}
		if e.Deleted {
			continue
		}
		if e.Size < 0 {
			return fmt.Errorf("entry %d (%q): negative size: %w", i, e.Path, ErrInvalid)
		}
		if e.Mode&^0o777 != 0 {
			return fmt.Errorf("entry %d (%q): mode %#o beyond permission bits: %w", i, e.Path, e.Mode, ErrInvalid)
		}
	}
	return nil
}

// isUUID reports whether s is a UUID in canonical lower-case form,
// [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, checked without a
// regexp (an event holds two UUIDs, and every event read is validated).
func isUUID(s string) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !lowerHex[s[i]] && i != 8 && i != 13 && i != 18 && i != 23 {
			return false
		}
	}
	return true
}

// lowerHex marks the bytes of lower-case hexadecimal.
var lowerHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

// escapedLen is len(EscapeToken(s)), computed without building the token.
func escapedLen(s string) int {
	if s == "" {
		return 1
	}
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !tokenSafe(s[i]) {
			n += 2
		}
	}
	return n
}

// CheckPartitionToken reports (ErrTooLarge) a partition key whose subject token
// (EscapeToken) is longer than MaxTokenLen: no event can carry it. A commit
// leaves the files of such a partition out, with a warning naming them, and
// commits the others.
func CheckPartitionToken(partition string) error {
	if n := escapedLen(partition); n > MaxTokenLen {
		return fmt.Errorf("partition %q escapes to more than %d bytes (%d): %w", clip(partition), MaxTokenLen, n, ErrTooLarge)
	}
	return nil
}

// validateHeader checks everything but the entries' own fields.
func validateHeader(e Event) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("invalid event: "+format+": %w", append(args, ErrInvalid)...)
	}
	switch {
	case e.V != FormatVersion:
		return fmt.Errorf("event version %d (this build reads %d): %w", e.V, FormatVersion, ErrUnknownVersion)
	case !isUUID(e.Ledger):
		return bad("ledger %q is not a uuid", clip(e.Ledger))
	case !isUUID(e.Commit):
		return bad("commit %q is not a uuid", clip(e.Commit))
	case e.Host == "" || len(e.Host) > MaxHostLen:
		return bad("host must be 1-%d bytes", MaxHostLen)
	case e.At.IsZero():
		return bad("no time")
	case len(e.Message) > MaxMessageLen:
		return fmt.Errorf("invalid event: message of %d bytes, limit %d: %w", len(e.Message), MaxMessageLen, ErrTooLarge)
	case e.Partition == "":
		return bad("empty partition")
	case escapedLen(e.Partition) > MaxTokenLen:
		return fmt.Errorf("invalid event: %w", CheckPartitionToken(e.Partition))
	case e.ModelSeq == 0:
		return bad("modelSeq 0")
	case (e.ModelSeq == 1) != (e.Prev == 0):
		return bad("modelSeq %d with prev %d", e.ModelSeq, e.Prev)
	case e.Parts < 1 || e.Parts > MaxBatch:
		return bad("parts %d outside 1..%d", e.Parts, MaxBatch)
	case e.Part < 1 || e.Part > e.Parts:
		return bad("part %d outside 1..%d", e.Part, e.Parts)
	case e.Manifest.IsZero() == (len(e.Entries) == 0):
		return bad("want entries or a manifest, exactly one")
	}
	return nil
}

// CheckEntriesPartition verifies that every entry belongs to the partition.
func CheckEntriesPartition(partition string, es []Entry) error {
	for _, en := range es {
		if InPartition(en.Path, partition) {
			continue
		}
		if p := PartitionKey(en.Path); p != partition {
			return fmt.Errorf("invalid event: path %q belongs to partition %q, not %q: %w", clip(en.Path), p, partition, ErrInvalid)
		}
	}
	return nil
}

// EncodeEvent returns the JSON form of a valid event.
func EncodeEvent(e Event) ([]byte, error) {
	if err := ValidateEvent(e); err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	w := wireEvent{
		V: e.V, Ledger: e.Ledger, Commit: e.Commit, Host: e.Host, At: e.At.UTC(),
		Message: e.Message, Partition: e.Partition, ModelSeq: e.ModelSeq, Prev: e.Prev,
		Parts: e.Parts, Part: e.Part, Entries: toWire(e.Entries),
	}
	if !e.Manifest.IsZero() {
		m := e.Manifest
		w.Manifest = &m
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	if len(b) > MaxEventSize {
		return nil, fmt.Errorf("encode event: %d bytes, limit %d (use a manifest): %w", len(b), MaxEventSize, ErrTooLarge)
	}
	return b, nil
}

// strictDecode decodes one JSON value into v: unknown fields, wrong types and
// trailing data are errors.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// checkVersion reads only "v", so that an unknown version is reported as such even
// when the rest of the document has a shape this code does not know.
func checkVersion(what string, b []byte) error {
	var probe struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("decode %s: %v: %w", what, err, ErrInvalid)
	}
	if probe.V == nil {
		return fmt.Errorf("decode %s: no version field \"v\": %w", what, ErrInvalid)
	}
	if *probe.V != FormatVersion {
		return fmt.Errorf("decode %s: version %d (this build reads %d): %w", what, *probe.V, FormatVersion, ErrUnknownVersion)
	}
	return nil
}

// DecodeEvent parses and validates one event. Errors wrap ErrInvalid,
// ErrUnknownVersion or ErrTooLarge.
func DecodeEvent(b []byte) (Event, error) {
	if len(b) > MaxEventSize {
		return Event{}, fmt.Errorf("decode event: %d bytes, limit %d: %w", len(b), MaxEventSize, ErrTooLarge)
	}
	if e, ok := decodeEventFast(b); ok {
		return e, nil
	}
	return decodeEventStrict(b)
}

// decodeEventStrict is DecodeEvent through encoding/json, for any input: the
// reference decodeEventFast must agree with, and what explains every error.
func decodeEventStrict(b []byte) (Event, error) {
	var w wireEvent
	if err := strictDecode(b, &w); err != nil || w.V != FormatVersion {
		// Report an unknown version as such, whatever else is wrong.
		if verr := checkVersion("event", b); verr != nil {
			return Event{}, verr
		}
		return Event{}, fmt.Errorf("decode event: %v: %w", err, ErrInvalid)
	}
	es, err := fromWire(w.Entries)
	if err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	e := Event{
		V: w.V, Ledger: w.Ledger, Commit: w.Commit, Host: w.Host, At: w.At,
		Message: w.Message, Partition: w.Partition, ModelSeq: w.ModelSeq, Prev: w.Prev,
		Parts: w.Parts, Part: w.Part, Entries: es,
	}
	if w.Manifest != nil {
		if w.Manifest.IsZero() {
			return Event{}, fmt.Errorf("decode event: zero manifest digest: %w", ErrInvalid)
		}
		e.Manifest = *w.Manifest
	}
	if err := validateHeader(e); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	if err := CheckEntriesPartition(e.Partition, e.Entries); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	return e, nil
}

// EncodeManifest returns the manifest blob for entries too large to inline.
func EncodeManifest(es []Entry) ([]byte, error) {
	if err := validateEntries(es); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return json.Marshal(wireManifest{V: FormatVersion, Entries: toWire(es)})
}

// DecodeManifest parses a manifest blob and checks its entries belong to partition.
func DecodeManifest(b []byte, partition string) ([]Entry, error) {
	if len(b) > MaxManifestLen {
		return nil, fmt.Errorf("decode manifest: %d bytes, limit %d: %w", len(b), MaxManifestLen, ErrTooLarge)
	}
	if err := checkVersion("manifest", b); err != nil {
		return nil, err
	}
	var w wireManifest
	if err := strictDecode(b, &w); err != nil {
		return nil, fmt.Errorf("decode manifest: %v: %w", err, ErrInvalid)
	}
	if len(w.Entries) == 0 {
		return nil, fmt.Errorf("decode manifest: no entries: %w", ErrInvalid)
	}
	es, err := fromWire(w.Entries)
	if err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if err := CheckEntriesPartition(partition, es); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	return es, nil
}

// Externalize moves e's entries into a manifest when the encoded event would exceed
// MaxInlineSize. It returns the event to publish and the manifest blob to store
// first (nil when the entries stay inline).
func Externalize(e Event) (Event, []byte, error) {
	if encodedBound(e) <= MaxInlineSize {
		// Surely inline: no encoding (the log's Append encodes it), only the
		// validation EncodeEvent would have failed on.
		if err := ValidateEvent(e); err != nil {
			return Event{}, nil, fmt.Errorf("encode event: %w", err)
		}
		return e, nil, nil
	}
	b, err := EncodeEvent(e)
	if err == nil && len(b) <= MaxInlineSize {
		return e, nil, nil
	}
	if err != nil && !errors.Is(err, ErrTooLarge) {
		return Event{}, nil, err
	}
	m, err := EncodeManifest(e.Entries)
	if err != nil {
		return Event{}, nil, err
	}
	e.Entries, e.Manifest = nil, DigestOf(m)
	return e, m, nil
}

// encodedBound is an upper bound of len(EncodeEvent(e)): every string byte
// escaped to its longest (\u00XX, or \ufffd for a byte of invalid UTF-8: 6
// bytes), every number at its most digits, every optional field present
// (TestEncodedBound).
func encodedBound(e Event) int {
	const event, entry = 512, 192 // field names, quotes, numbers, time, digests
	n := event + 6*(len(e.Ledger)+len(e.Commit)+len(e.Host)+len(e.Message)+len(e.Partition))
	for _, en := range e.Entries {
		n += entry + 6*len(en.Path)
	}
	return n
}
