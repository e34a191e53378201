package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
)

// FormatVersion is the snapshot format this code writes and the only one it reads.
const FormatVersion = 1

// kind names the document in its header and trailer.
const kind = "syncledger-snapshot"

// Snapshot is a ledger's index at a commit boundary: what a host that has
// applied every event up to Seq holds (its HWM, marks and index rows), minus
// the host-local facts (mtimes, lazy flags).
type Snapshot struct {
	Ledger  string                    // the ledger's UUID
	Name    string                    // the ledger's name, for messages
	Seq     ledger.Seq                // every event ≤ Seq is applied; Seq ends a commit (or is 0)
	Marks   map[string]projector.Mark // partition → mark
	Entries []Entry                   // in path order, distinct
}

// Entry is one file of the index.
type Entry struct {
	Path   string
	SHA256 ledger.Digest
	Size   int64
	Mode   uint32
	Seq    ledger.Seq // the event that wrote this content
}

// Bytes returns the total content size of the entries.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for _, e := range s.Entries {
		n += e.Size
	}
	return n
}

// State returns the snapshot as the projector core's durable state.
func (s *Snapshot) State() projector.State {
	st := projector.State{Ledger: s.Ledger, HWM: s.Seq, Marks: maps.Clone(s.Marks), Files: make(map[string]projector.File, len(s.Entries))}
	if st.Marks == nil {
		st.Marks = map[string]projector.Mark{}
	}
	for _, e := range s.Entries {
		st.Files[e.Path] = projector.File{SHA256: e.SHA256, Size: e.Size, Mode: e.Mode}
	}
	return st
}

// Filter returns the part of s that belongs to the partitions keep accepts.
func (s *Snapshot) Filter(keep func(partition string) bool) *Snapshot {
	out := &Snapshot{Ledger: s.Ledger, Name: s.Name, Seq: s.Seq, Marks: map[string]projector.Mark{}}
	for p, m := range s.Marks {
		if keep(p) {
			out.Marks[p] = m
		}
	}
	for _, e := range s.Entries {
		if keep(ledger.PartitionKey(e.Path)) {
			out.Entries = append(out.Entries, e)
		}
	}
	return out
}

// Validate checks a snapshot's consistency: a valid lineage, sorted distinct
// valid paths, content fields in range, every entry written at or below Seq by
// an event its partition's mark covers, and marks at or below Seq.
func (s *Snapshot) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("invalid snapshot: "+format+": %w", append(args, ledger.ErrInvalid)...)
	}
	if err := ledger.ValidateUUID(s.Ledger); err != nil {
		return fmt.Errorf("invalid snapshot: %w", err)
	}
	for p, m := range s.Marks {
		switch {
		case p == "" || len(p) > ledger.MaxPathLen:
			return bad("empty or overlong partition key")
		case m.ModelSeq == 0 || m.Seq == 0 || m.ModelSeq > uint64(m.Seq):
			return bad("mark of %q is modelSeq %d at seq %d", p, m.ModelSeq, m.Seq)
		case m.Seq > s.Seq:
			return bad("mark of %q at seq %d is above the snapshot's seq %d", p, m.Seq, s.Seq)
		}
	}
	for i, e := range s.Entries {
		if err := ledger.ValidatePath(e.Path); err != nil {
			return fmt.Errorf("invalid snapshot: entry %d: %w", i, err)
		}
		if i > 0 && s.Entries[i-1].Path >= e.Path {
			return bad("entry %d (%q) is not after %q", i, e.Path, s.Entries[i-1].Path)
		}
		switch m := s.Marks[ledger.PartitionKey(e.Path)]; {
		case e.Size < 0 || e.Mode&^0o777 != 0:
			return bad("entry %q has size %d, mode %#o", e.Path, e.Size, e.Mode)
		case e.Seq == 0 || e.Seq > m.Seq:
			return bad("entry %q was written at seq %d, its partition's mark is at seq %d", e.Path, e.Seq, m.Seq)
		}
	}
	return nil
}

type wireHeader struct {
	V       int        `json:"v"`
	Kind    string     `json:"kind"`
	Ledger  string     `json:"ledger"`
	Name    string     `json:"name"`
	Seq     ledger.Seq `json:"seq"`
	Entries int        `json:"entries"`
	Marks   int        `json:"marks"`
	Bytes   int64      `json:"bytes"`
}

type wireEntry struct {
	Path   string        `json:"path"`
	SHA256 ledger.Digest `json:"sha256"`
	Size   int64         `json:"size"`
	Mode   uint32        `json:"mode"`
	Seq    ledger.Seq    `json:"seq"`
}

type wireMark struct {
	Partition string     `json:"partition"`
	ModelSeq  uint64     `json:"modelSeq"`
	Seq       ledger.Seq `json:"seq"`
}

type wireTrailer struct {
	End    string `json:"end"`
	SHA256 string `json:"sha256"`
}

// Encode writes s in the snapshot format: a zstd stream of JSON lines — a header
// (version, ledger, seq, counts), the entries in path order, the marks in
// partition order, and a trailer holding the SHA-256 of every line before it. The
// output is deterministic: the same snapshot always encodes to the same bytes.
func Encode(w io.Writer, s *Snapshot) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(zw, h), 64<<10)
	enc := json.NewEncoder(bw) // one value per line
	enc.SetEscapeHTML(false)
	err = enc.Encode(wireHeader{V: FormatVersion, Kind: kind, Ledger: s.Ledger, Name: s.Name, Seq: s.Seq,
		Entries: len(s.Entries), Marks: len(s.Marks), Bytes: s.Bytes()})
	for i := 0; err == nil && i < len(s.Entries); i++ {
		e := s.Entries[i]
		err = enc.Encode(wireEntry(e))
	}
	for _, p := range slices.Sorted(maps.Keys(s.Marks)) {
		if err != nil {
			break
		}
		m := s.Marks[p]
		err = enc.Encode(wireMark{Partition: p, ModelSeq: m.ModelSeq, Seq: m.Seq})
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = json.NewEncoder(zw).Encode(wireTrailer{End: kind, SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	return nil
}

// Header is what a snapshot's first line says about it.
type Header struct {
	Ledger  string
	Seq     ledger.Seq
	Entries int
	Marks   int
	Bytes   int64
}

// Decode reads a snapshot written by Encode and verifies it: the compressed
// stream's own checksum, the trailer's SHA-256 over the lines, the counts of the
// header, strict JSON (unknown fields are errors) and Validate. A truncated or
// altered snapshot is an error wrapping ledger.ErrChecksum or ledger.ErrInvalid;
// a newer format one wrapping ledger.ErrUnknownVersion.
func Decode(r io.Reader) (*Snapshot, error) {
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	defer zr.Close()
	d := &decoder{br: bufio.NewReaderSize(zr, 64<<10), h: sha256.New()}
	s, err := d.decode()
	if err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	return s, nil
}

type decoder struct {
	br   *bufio.Reader
	h    hash.Hash
	line int
}

// next returns the next line (without its newline), hashed unless it is the trailer.
func (d *decoder) next(hashed bool) ([]byte, error) {
	d.line++
	b, err := d.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("line %d longer than %d bytes: %w", d.line, d.br.Size(), ledger.ErrInvalid)
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("truncated at line %d: %w", d.line, ledger.ErrInvalid)
	case err != nil:
		return nil, corrupt(err)
	}
	if hashed {
		d.h.Write(b)
	}
	return b[:len(b)-1], nil
}

// corrupt maps a decompression error to ErrChecksum (zstd frames carry a checksum).
func corrupt(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated: %v: %w", err, ledger.ErrInvalid)
	}
	return fmt.Errorf("corrupt compressed stream: %v: %w", err, ledger.ErrChecksum)
}

func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func (d *decoder) decode() (*Snapshot, error) {
	b, err := d.next(true)
	if err != nil {
		return nil, err
	}
	var probe struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &probe); err != nil || probe.V == nil {
		return nil, fmt.Errorf("header is not a snapshot header: %w", ledger.ErrInvalid)
	}
	if *probe.V != FormatVersion {
		return nil, fmt.Errorf("version %d (this build reads %d): %w", *probe.V, FormatVersion, ledger.ErrUnknownVersion)
	}
	var hd wireHeader
	if err := strict(b, &hd); err != nil || hd.Kind != kind || hd.Entries < 0 || hd.Marks < 0 {
		return nil, fmt.Errorf("bad header: %v: %w", err, ledger.ErrInvalid)
	}
	s := &Snapshot{Ledger: hd.Ledger, Name: hd.Name, Seq: hd.Seq, Marks: make(map[string]projector.Mark, min(hd.Marks, 1<<20)),
		Entries: make([]Entry, 0, min(hd.Entries, 1<<20))}
	for range hd.Entries {
		if b, err = d.next(true); err != nil {
			return nil, err
		}
		var e wireEntry
		if err := strict(b, &e); err != nil {
			return nil, fmt.Errorf("line %d: entry: %v: %w", d.line, err, ledger.ErrInvalid)
		}
		s.Entries = append(s.Entries, Entry(e))
	}
	for range hd.Marks {
		if b, err = d.next(true); err != nil {
			return nil, err
		}
		var m wireMark
		if err := strict(b, &m); err != nil {
			return nil, fmt.Errorf("line %d: mark: %v: %w", d.line, err, ledger.ErrInvalid)
		}
		if _, dup := s.Marks[m.Partition]; dup {
			return nil, fmt.Errorf("line %d: second mark of %q: %w", d.line, m.Partition, ledger.ErrInvalid)
		}
		s.Marks[m.Partition] = projector.Mark{ModelSeq: m.ModelSeq, Seq: m.Seq}
	}
	sum := hex.EncodeToString(d.h.Sum(nil))
	if b, err = d.next(false); err != nil {
		return nil, err
	}
	var tr wireTrailer
	if err := strict(b, &tr); err != nil || tr.End != kind {
		return nil, fmt.Errorf("line %d: no trailer where the header's counts end: %w", d.line, ledger.ErrInvalid)
	}
	if tr.SHA256 != sum {
		return nil, fmt.Errorf("content hashes to %s, trailer says %s: %w", sum, tr.SHA256, ledger.ErrChecksum)
	}
	// The end of the compressed stream: nothing after the trailer, and the
	// frame's own checksum is verified by reading to EOF.
	var one [1]byte
	if n, err := io.ReadFull(d.br, one[:]); n > 0 {
		return nil, fmt.Errorf("data after the trailer: %w", ledger.ErrInvalid)
	} else if !errors.Is(err, io.EOF) {
		return nil, corrupt(err)
	}
	if s.Bytes() != hd.Bytes {
		return nil, fmt.Errorf("entries hold %d bytes, header says %d: %w", s.Bytes(), hd.Bytes, ledger.ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}
