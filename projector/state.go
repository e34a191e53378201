package projector

import (
	"fmt"
	"maps"

	"github.com/syncledger/syncledger/ledger"
)

// Mark is the position of the last event of a partition the host has applied,
// contiguously from modelSeq 1. The zero Mark means none applied.
type Mark struct {
	ModelSeq uint64     // modelSeq of that event
	Seq      ledger.Seq // its stream seq
}

// File is what the ledger says about one path of the cache: the index row the
// commit scan compares the cache against.
type File struct {
	SHA256 ledger.Digest
	Size   int64
	Mode   uint32 // permission bits
	// Lazy: the content is deliberately not in the cache (lazy hydration,
	// metadata only); it is fetched on demand (Core.Hydrate). A lazy file absent
	// from the cache is not a deletion.
	Lazy bool
}

// SameContent reports whether f and g describe the same bytes and mode,
// whatever their Lazy flags.
func (f File) SameContent(g File) bool {
	return f.SHA256 == g.SHA256 && f.Size == g.Size && f.Mode == g.Mode
}

// State is the durable state of a host, persisted atomically as one unit (with
// the index) by the shell.
type State struct {
	Ledger string          // the ledger's UUID (lineage); "" until adopted
	HWM    ledger.Seq      // every event with seq ≤ HWM is applied; HWM is a commit end
	Marks  map[string]Mark // partition → mark
	Files  map[string]File // path → index row
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	c := State{Ledger: s.Ledger, HWM: s.HWM, Marks: maps.Clone(s.Marks), Files: maps.Clone(s.Files)}
	if c.Marks == nil {
		c.Marks = map[string]Mark{}
	}
	if c.Files == nil {
		c.Files = map[string]File{}
	}
	return c
}

// validate checks what can be checked of a persisted state on its own.
func (s State) validate() error {
	if s.Ledger == "" {
		if s.HWM != 0 || len(s.Marks) != 0 || len(s.Files) != 0 {
			return fmt.Errorf("state without a ledger uuid holds data: %w", ledger.ErrInvalid)
		}
		return nil
	}
	if err := ledger.ValidateUUID(s.Ledger); err != nil {
		return err
	}
	for p, m := range s.Marks {
		if p == "" || (m.ModelSeq == 0) != (m.Seq == 0) || m.ModelSeq > uint64(m.Seq) {
			return fmt.Errorf("mark of partition %q is modelSeq %d at seq %d: %w", p, m.ModelSeq, m.Seq, ledger.ErrInvalid)
		}
	}
	for p, f := range s.Files {
		if err := ledger.ValidatePath(p); err != nil {
			return err
		}
		if f.Size < 0 {
			return fmt.Errorf("index row %q has size %d: %w", p, f.Size, ledger.ErrInvalid)
		}
	}
	return nil
}
