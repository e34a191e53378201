package swamp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/syncledger/syncledger/ledger"
)

// SidecarName is the swamp cache's sync-state sidecar, at the cache root.
const SidecarName = ".datastore-sync-state.json"

// Sidecar fields (s3_cache_sync.ts SyncState; reference §2.2). The S3 extension
// names the monolith fingerprint remoteIndexETag, the GCS one
// remoteIndexGeneration.
const (
	FieldVersion        = "version"
	FieldCommitSeq      = "commitSeq"
	FieldETag           = "remoteIndexETag"
	FieldGeneration     = "remoteIndexGeneration"
	FieldLocalDirty     = "localDirty"
	FieldLazyPullActive = "lazyPullActive"
)

// Sidecar is a parsed .datastore-sync-state.json. It keeps every top-level
// field, in order, so that a repair rewrites only the fields it changes.
type Sidecar struct {
	fields []sidecarField

	Version int // 1 or 2 when Valid
	// Valid: swamp would load it (a JSON object with version 1 or 2); otherwise
	// swamp treats the sidecar as absent and takes its slow path.
	Valid          bool
	CommitSeq      *int64 // v2: the armed commitSeq, nil if none
	LocalDirty     bool
	LazyPullActive bool
}

type sidecarField struct {
	name  string
	value json.RawMessage
}

// FieldChange is one field a repair changed.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`           // the old JSON value
	New   string `json:"new,omitempty"` // the new JSON value; "" when the field was removed
}

func (c FieldChange) String() string {
	if c.New == "" {
		return fmt.Sprintf("%s: %s → (removed)", c.Field, c.Old)
	}
	return fmt.Sprintf("%s: %s → %s", c.Field, c.Old, c.New)
}

// ParseSidecar parses a sidecar. Anything but a JSON object is an error; an
// object swamp would not load parses with Valid false.
func ParseSidecar(b []byte) (*Sidecar, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("parse sidecar: not a JSON object: %w", ledger.ErrInvalid)
	}
	s := &Sidecar{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parse sidecar: %v: %w", err, ledger.ErrInvalid)
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("parse sidecar: field %q: %v: %w", name, err, ledger.ErrInvalid)
		}
		if seen[name] {
			// JSON.parse keeps the last duplicate; so do we.
			for i := range s.fields {
				if s.fields[i].name == name {
					s.fields[i].value = v
				}
			}
			continue
		}
		seen[name] = true
		s.fields = append(s.fields, sidecarField{name, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("parse sidecar: %v: %w", err, ledger.ErrInvalid)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse sidecar: trailing data: %w", ledger.ErrInvalid)
	}
	if v, ok := s.intField(FieldVersion); ok && (v == 1 || v == 2) {
		s.Version, s.Valid = int(v), true
	}
	if v, ok := s.intField(FieldCommitSeq); ok && s.Version == 2 {
		s.CommitSeq = &v
	}
	s.LocalDirty = s.boolField(FieldLocalDirty)
	s.LazyPullActive = s.boolField(FieldLazyPullActive)
	return s, nil
}

func (s *Sidecar) raw(name string) (json.RawMessage, bool) {
	for _, f := range s.fields {
		if f.name == name {
			return f.value, true
		}
	}
	return nil, false
}

func (s *Sidecar) intField(name string) (int64, bool) {
	raw, ok := s.raw(name)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}

func (s *Sidecar) boolField(name string) bool {
	raw, ok := s.raw(name)
	return ok && string(bytes.TrimSpace(raw)) == "true"
}

// Fingerprint returns the monolith fingerprint field present ("remoteIndexETag"
// or "remoteIndexGeneration") and its value; "" for none or an empty one.
func (s *Sidecar) Fingerprint() (field, value string) {
	for _, name := range []string{FieldETag, FieldGeneration} {
		raw, ok := s.raw(name)
		if !ok {
			continue
		}
		var v string
		if json.Unmarshal(raw, &v) == nil && v != "" {
			return name, v
		}
	}
	return "", ""
}

// Disarm changes exactly what makes swamp's next pull skip its slow path, and
// nothing else:
//
//   - it removes "commitSeq" (the v2 fast-path fingerprint compared with
//     _meta.json's commitSeq), if present;
//   - it sets "remoteIndexETag" (S3) and "remoteIndexGeneration" (GCS) to "",
//     where present and non-empty (the monolith fast path needs a non-empty one).
//
// Every other field (localDirty, dirtyPaths, bulkInvalidated, lazyPullActive,
// lastVerifiedAt, dataKeyMigrated, …) keeps its value and position. It returns
// the changes; none means the sidecar already arms no fast path.
func (s *Sidecar) Disarm() []FieldChange {
	var changes []FieldChange
	kept := s.fields[:0]
	for _, f := range s.fields {
		switch f.name {
		case FieldCommitSeq:
			changes = append(changes, FieldChange{Field: f.name, Old: compact(f.value)})
			continue
		case FieldETag, FieldGeneration:
			var v string
			if json.Unmarshal(f.value, &v) != nil || v != "" {
				changes = append(changes, FieldChange{Field: f.name, Old: compact(f.value), New: `""`})
				f.value = json.RawMessage(`""`)
			}
		}
		kept = append(kept, f)
	}
	s.fields = kept
	s.CommitSeq = nil
	return changes
}

// Encode returns the sidecar as JSON: its fields in their original order, each
// value as it was (re-indented), two-space indentation.
func (s *Sidecar) Encode() []byte {
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, f := range s.fields {
		if i > 0 {
			buf.WriteString(",")
		}
		name, _ := json.Marshal(f.name)
		buf.WriteString("\n  ")
		buf.Write(name)
		buf.WriteString(": ")
		var v bytes.Buffer
		if json.Indent(&v, f.value, "  ", "  ") != nil {
			v.Reset()
			v.Write(f.value)
		}
		buf.Write(v.Bytes())
	}
	if len(s.fields) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	return buf.Bytes()
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
