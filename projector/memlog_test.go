package projector

import (
	"fmt"
	"time"

	"github.com/syncledger/syncledger/ledger"
)

// memLog is a model of the ledger's log for tests: gapless seqs from 1, the chain
// checked at append (ledger.ConflictError), commits appended atomically, and a
// blob store holding every content an entry references.
type memLog struct {
	info    ledger.Info
	recs    []ledger.Record // recs[i].Seq == i+1
	heads   map[string]Mark
	blobs   map[ledger.Digest]string
	commits int
}

const (
	testLedger  = "11111111-1111-4111-8111-111111111111"
	otherLedger = "22222222-2222-4222-8222-222222222222"
)

var testTime = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newMemLog(uuid string) *memLog {
	return &memLog{
		info:  ledger.Info{Name: "test", UUID: uuid, Format: ledger.FormatVersion, Blobs: "mem://"},
		heads: map[string]Mark{},
		blobs: map[ledger.Digest]string{},
	}
}

func (l *memLog) head() ledger.Seq               { return ledger.Seq(len(l.recs)) }
func (l *memLog) mark(p string) Mark             { return l.heads[p] }
func (l *memLog) rec(s ledger.Seq) ledger.Record { return l.recs[s-1] }

// write returns the entry writing content at path and stores the content.
func (l *memLog) write(path, content string) ledger.Entry {
	d := ledger.DigestOf([]byte(content))
	l.blobs[d] = content
	return ledger.Entry{Path: path, SHA256: d, Size: int64(len(content)), Mode: 0o644}
}

func del(path string) ledger.Entry { return ledger.Entry{Path: path, Deleted: true} }

// newCommit returns a commit with a fresh id.
func (l *memLog) newCommit(host string, entries []ledger.Entry) ledger.Commit {
	l.commits++
	return ledger.Commit{
		ID:   fmt.Sprintf("00000000-0000-7000-8000-%012x", l.commits),
		Host: host, At: testTime.Add(time.Duration(l.commits) * time.Second),
		Entries: entries,
	}
}

// append stores a commit's events atomically, like CommitLog.Append.
func (l *memLog) append(evs []ledger.Event) ([]ledger.Seq, error) {
	for _, e := range evs {
		if h := l.heads[e.Partition]; h.Seq != e.Prev {
			return nil, &ledger.ConflictError{Partition: e.Partition, Expected: e.Prev, Actual: h.Seq}
		}
	}
	seqs := make([]ledger.Seq, len(evs))
	for i, e := range evs {
		seqs[i] = l.head() + 1
		l.recs = append(l.recs, ledger.Record{Seq: seqs[i], Event: e})
		l.heads[e.Partition] = Mark{ModelSeq: e.ModelSeq, Seq: seqs[i]}
	}
	return seqs, nil
}

// commitRemote builds a commit on the log's own heads (a writer that is up to
// date) and appends it.
func (l *memLog) commitRemote(host string, entries []ledger.Entry) ([]ledger.Seq, error) {
	evs, err := CommitEvents(l.info.UUID, l.mark, l.newCommit(host, entries))
	if err != nil {
		return nil, err
	}
	return l.append(evs)
}

// read returns the records with from ≤ seq ≤ to (to 0: the head).
func (l *memLog) read(from, to ledger.Seq) []ledger.Record {
	if to == 0 || to > l.head() {
		to = l.head()
	}
	if from < 1 {
		from = 1
	}
	if from > to {
		return nil
	}
	return l.recs[from-1 : to]
}

// readPartition returns the partition's records with from ≤ seq ≤ to (to 0: head).
func (l *memLog) readPartition(p string, from, to ledger.Seq) []ledger.Record {
	var out []ledger.Record
	for _, r := range l.read(from, to) {
		if r.Event.Partition == p {
			out = append(out, r)
		}
	}
	return out
}

// filesAt folds the events of partition p with seq ≤ upto: the partition's
// files as the ledger says after them.
func (l *memLog) filesAt(p string, upto ledger.Seq) map[string]ledger.Entry {
	files := map[string]ledger.Entry{}
	for _, r := range l.readPartition(p, 1, upto) {
		for _, en := range r.Event.Entries {
			if en.Deleted {
				delete(files, en.Path)
			} else {
				files[en.Path] = en
			}
		}
	}
	return files
}
