package consumers

import (
	"context"
	"fmt"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// Summary is the JSON form of a commit that the built-in consumers write (one
// audit line, one webhook body, one `tail --json` line). Its fields are a stable
// schema: new fields may be added, none removed or changed.
type Summary struct {
	Ledger     string         `json:"ledger"` // ledger name
	Seq        ledger.Seq     `json:"seq"`    // the commit's seq (its last part's)
	Commit     string         `json:"commit"`
	Host       string         `json:"host"`
	At         time.Time      `json:"at"`
	Message    string         `json:"message,omitempty"`
	Parts      int            `json:"parts"`      // partitions the commit touches
	Partitions []string       `json:"partitions"` // those included here (fewer than parts when filtered)
	Events     []SummaryEvent `json:"events"`
	Entries    []SummaryEntry `json:"entries"`
	Files      int            `json:"files"`   // files written
	Deleted    int            `json:"deleted"` // files deleted
	Bytes      int64          `json:"bytes"`   // size of the files written
	// Unresolved lists manifests that were not read (no blob store was given):
	// their entries are missing from Entries, Files, Deleted and Bytes.
	Unresolved []string `json:"unresolved,omitempty"`
}

// SummaryEvent is one part of a commit.
type SummaryEvent struct {
	Seq       ledger.Seq `json:"seq"`
	Partition string     `json:"partition"`
	ModelSeq  uint64     `json:"modelSeq"`
	Prev      ledger.Seq `json:"prev"`
	Manifest  string     `json:"manifest,omitempty"`
}

// SummaryEntry is one file of a commit.
type SummaryEntry struct {
	Path    string `json:"path"`
	SHA256  string `json:"sha256,omitempty"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	Deleted bool   `json:"deleted,omitempty"`
}

// Summarize returns c's summary. Entries kept in a manifest blob are read from
// blobs; with nil blobs they are listed in Unresolved instead. A manifest that
// cannot be read or decoded is an error.
func Summarize(ctx context.Context, ledgerName string, c Commit, blobs *ledger.Bucket) (Summary, error) {
	s := Summary{
		Ledger: ledgerName, Seq: c.Seq, Commit: c.ID, Host: c.Host, At: c.At.UTC(), Message: c.Message,
		Parts: c.Parts, Partitions: c.Partitions(),
		Events: make([]SummaryEvent, 0, len(c.Records)), Entries: []SummaryEntry{},
	}
	for _, r := range c.Records {
		e := r.Event
		ev := SummaryEvent{Seq: r.Seq, Partition: e.Partition, ModelSeq: e.ModelSeq, Prev: e.Prev}
		entries := e.Entries
		if !e.Manifest.IsZero() {
			ev.Manifest = e.Manifest.String()
			if blobs == nil {
				s.Unresolved = append(s.Unresolved, ev.Manifest)
			} else {
				b, err := ledger.ReadBlob(ctx, blobs, e.Manifest)
				if err != nil {
					return Summary{}, fmt.Errorf("summarize commit %s: read manifest of seq %d: %w", c.ID, r.Seq, err)
				}
				if entries, err = ledger.DecodeManifest(b, e.Partition); err != nil {
					return Summary{}, fmt.Errorf("summarize commit %s: manifest of seq %d: %w", c.ID, r.Seq, err)
				}
			}
		}
		s.Events = append(s.Events, ev)
		for _, en := range entries {
			if en.Deleted {
				s.Deleted++
				s.Entries = append(s.Entries, SummaryEntry{Path: en.Path, Deleted: true})
				continue
			}
			s.Files++
			s.Bytes += en.Size
			s.Entries = append(s.Entries, SummaryEntry{Path: en.Path, SHA256: en.SHA256.String(), Size: en.Size, Mode: en.Mode})
		}
	}
	return s, nil
}
