package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector"
	"github.com/syncledger/syncledger/projector/statedb"
)

// A host tells the history it applied by the commits at its marks, not by
// seqs alone (docs/design.md §4, "Identity"): a server restored from an older
// backup and written to since holds, at the seqs this cache applied, other
// commits — or, at a seq past its head, none. So beside each partition's mark
// the state records the commit of the event there, and the top commit, the
// commit of the event at the highest seq this cache applied (statedb.Commit);
// a sync, a status, a watch and a commit compare the log's commit at the top
// commit's seq with it before they trust the HWM or the marks. A restored log
// holds a prefix of the history this cache applied and then other commits,
// so the history agrees at every lower seq when it agrees there. The check
// is one request (CommitAt): the fast path (head == HWM) makes it, and a sync
// that reads makes it before reading.

// persistCommits records, in the transaction persisting rd, the commits at
// the marks rd moves and the top commit (statedb.Commit): the highest of
// them, the event at the highest seq rd applies.
//
// When rd's HWM is the log's head the sync read (s.head), it records the
// head's stamp too: the next no-op sync then checks the history it applied
// without a request (checkHead).
func (s *session) persistCommits(tx *statedb.Tx, rd projector.Ready) error {
	var top statedb.Commit
	for p, m := range rd.Marks {
		c := statedb.Commit{Seq: m.Seq, ID: s.commits[m.Seq]}
		if err := tx.PutMarkCommit(p, c); err != nil {
			return err
		}
		if c.Known() && c.Seq > top.Seq {
			top = c
		}
	}
	if err := tx.SetTopCommit(top); err != nil {
		return err
	}
	if rd.HWM == s.head.Seq && s.head.ID != "" {
		return tx.SetTopStamp(rd.HWM, s.head.ID)
	}
	return nil
}

// ForkError: the log holds, at a seq this cache applied, another commit than
// the one the cache applied there, or no message at all — the server lost
// events this cache applied (restored from an older backup, or replaced) and,
// for another commit, was written to since. It wraps ledger.ErrRewound. A
// sync heals it (heal.go): what the ledger lost is republished from this
// cache, and nothing this cache holds is deleted; never a quarantine.
type ForkError struct {
	Seq  ledger.Seq `json:"seq"`            // the seq this cache applied
	Want string     `json:"want,omitempty"` // the commit this cache applied there ("": not recorded)
	Got  string     `json:"got,omitempty"`  // the log's commit there: "" when the log holds none (Head < Seq) or no event there
	Head ledger.Seq `json:"head"`           // the log's last seq (of Partition's subject, when set)
	HWM  ledger.Seq `json:"hwm"`            // this cache's HWM (Partition's mark, when set)
	// Partition, when set: a scoped sync's check of this partition's mark.
	Partition string `json:"partition,omitempty"`
	// Skipped: this cache applied no event at Seq (it passed a lock's fence
	// record or a quarantine notice there, above its top commit), and the
	// log holds one there now.
	Skipped bool `json:"skipped,omitempty"`
}

func (e *ForkError) Error() string {
	const lost = "the server lost commits this cache applied (restored from an older backup, or replaced)"
	const since = "the server lost commits this cache applied (restored from an older backup) and was written to since"
	switch {
	case e.Partition != "" && e.Head < e.Seq:
		return fmt.Sprintf("partition %q ends at seq %d, below this cache's mark at seq %d: %s", e.Partition, e.Head, e.Seq, lost)
	case e.Partition != "":
		return fmt.Sprintf("the log holds commit %s at seq %d, partition %q's mark, where this cache applied commit %s: %s", e.Got, e.Seq, e.Partition, e.Want, since)
	case e.Head < e.Seq:
		return fmt.Sprintf("the log's last seq is %d, below seq %d this cache applied (its HWM is %d): %s", e.Head, e.Seq, e.HWM, lost)
	case e.Skipped && e.Got == "":
		return fmt.Sprintf("the log holds another message at seq %d than the one this cache passed there (its HWM is %d, the log's head %d): %s", e.Seq, e.HWM, e.Head, since)
	case e.Skipped:
		return fmt.Sprintf("the log holds commit %s at seq %d, where this cache applied no commit (its HWM is %d, the log's head %d): %s", e.Got, e.Seq, e.HWM, e.Head, since)
	case e.Want == "":
		return fmt.Sprintf("the log holds commit %s at seq %d, this cache's HWM, whose files and marks say it applied another there: %s", e.Got, e.Seq, since)
	case e.Got == "":
		return fmt.Sprintf("the log holds no commit at seq %d, where this cache applied commit %s (its HWM is %d, the log's head %d): %s", e.Seq, e.Want, e.HWM, e.Head, lost)
	}
	return fmt.Sprintf("the log holds commit %s at seq %d, where this cache applied commit %s (its HWM is %d, the log's head %d): %s", e.Got, e.Seq, e.Want, e.HWM, e.Head, since)
}

func (e *ForkError) Unwrap() error { return ledger.ErrRewound }

// checkCommit compares the log's commit at c.Seq with c, the commit this
// cache applied there: a *ForkError when they differ (or the log ends before
// c.Seq), nil when they agree, or when the log can no longer tell (the seq
// dropped by retention: a host that far behind is rebuilt from a snapshot
// anyway; a quarantined message still names its commit).
func (h *Host) checkCommit(ctx context.Context, c statedb.Commit, head, hwm ledger.Seq) error {
	if !c.Known() {
		return nil
	}
	if head < c.Seq {
		return &ForkError{Seq: c.Seq, Want: c.ID, Head: head, HWM: hwm}
	}
	got, err := h.logPort().CommitAt(ctx, c.Seq)
	if errors.Is(err, ledger.ErrNotFound) {
		b, berr := h.logPort().Bounds(ctx)
		if berr != nil {
			return fmt.Errorf("read the log's bounds: %w", berr)
		}
		if c.Seq < b.First {
			return nil
		}
		return &ForkError{Seq: c.Seq, Want: c.ID, Head: max(head, b.Last), HWM: hwm}
	}
	if err != nil {
		return fmt.Errorf("read the commit at seq %d: %w", c.Seq, err)
	}
	if got != c.ID {
		return &ForkError{Seq: c.Seq, Want: c.ID, Got: got, Head: head, HWM: hwm}
	}
	return nil
}

// checkHWM checks the top commit against the log whose last seq is head (see
// checkCommit); a log that ends below the HWM is a *ForkError too.
func (h *Host) checkHWM(ctx context.Context, head, hwm ledger.Seq) error {
	c, err := h.db.TopCommit()
	if err != nil {
		return err
	}
	return h.checkTop(ctx, c, head, hwm)
}

// checkTop is checkHWM for the top commit c.
func (h *Host) checkTop(ctx context.Context, c statedb.Commit, head, hwm ledger.Seq) error {
	if head < hwm {
		f := &ForkError{Seq: hwm, Head: head, HWM: hwm}
		if c.Seq == hwm {
			f.Want = c.ID
		}
		return f
	}
	if !c.Known() && hwm > 0 {
		return h.adoptHWMCommit(ctx, hwm)
	}
	if err := h.checkCommit(ctx, c, head, hwm); err != nil {
		return err
	}
	return h.checkSkipped(ctx, c, head, hwm)
}

// checkSkipped checks the messages above the top commit c up to the HWM:
// this cache applied no event there (the top commit is the highest it
// applied), only passed fence records, fence checks and notices, so an event
// the log holds there now is one of another history (a *ForkError, Skipped):
// a log restored at or above c and written to since. One read of those
// messages, only when the HWM is above c; nothing when c is not recorded or
// the log no longer holds them (dropped by retention: as checkCommit).
func (h *Host) checkSkipped(ctx context.Context, c statedb.Commit, head, hwm ledger.Seq) error {
	if !c.Known() || hwm <= c.Seq {
		return nil
	}
	var fork *ForkError
	err := h.logPort().Read(ctx, c.Seq+1, hwm, func(r ledger.Record) error {
		if r.Skip == nil {
			fork = &ForkError{Seq: r.Seq, Got: r.Event.Commit, Head: head, HWM: hwm, Skipped: true}
			return errStop
		}
		return nil
	})
	var re *ledger.RecordError
	switch {
	case fork != nil:
		return fork
	case errors.As(err, &re):
		// A message this cache passed is one the log refuses now: another
		// message than the one passed (a quarantine stays).
		return &ForkError{Seq: re.Seq, Head: head, HWM: hwm, Skipped: true}
	case errors.Is(err, ledger.ErrTruncated):
		return nil
	case err != nil:
		return fmt.Errorf("read the log from seq %d to the HWM %d: %w", c.Seq+1, hwm, err)
	}
	return nil
}

// checkHead is a full sync's identity check (see checkHWM) against the log's
// head and its stamp (ledger.Head.Stamp): when the head is the HWM with the
// stamp this cache recorded when it last found the log holding its history
// up to there, the log still holds it and no request is made — a no-op sync
// stays one request. The message at the HWM may be any (an event, a lock's
// fence record, a notice): a restored log is a prefix of the history and
// then other messages, each with a stamp of its own, so the same message at
// the HWM means the same history below it. Otherwise the log's commit at the
// top commit is asked, and the messages above it (checkTop), and the stamp
// recorded once they agree (a write, once per head).
func (h *Host) checkHead(ctx context.Context, top statedb.Commit, head ledger.Seq, stamp string, hwm ledger.Seq) error {
	stamped := head == hwm && hwm > 0 && stamp != ""
	if stamped {
		known, err := h.db.TopStamp()
		if err != nil {
			return err
		}
		if known == stamp {
			return nil
		}
	}
	if err := h.checkTop(ctx, top, head, hwm); err != nil || !stamped {
		return err
	}
	if err := h.db.Update(func(tx *statedb.Tx) error { return tx.SetTopStamp(head, stamp) }); err != nil {
		return fmt.Errorf("record the log's stamp of the HWM's message: %w", err)
	}
	return nil
}

// adoptHWMCommit records the top commit of a cache that has none (made by a
// release before these records, or rebuilt from a snapshot alone): the
// log's commit at the HWM, once the marks and rows say this cache applied
// that event there — its partition's mark at that seq and modelSeq, and each
// of its files indexed as of that seq with its digest (deleted: not
// indexed), unless a later event of the partition (a scoped sync) moved them
// past it. A record at the HWM that is not an event (a quarantine notice)
// leaves it unknown until the HWM moves.
func (h *Host) adoptHWMCommit(ctx context.Context, hwm ledger.Seq) error {
	var rec *ledger.Record
	err := h.logPort().Read(ctx, hwm, hwm, func(r ledger.Record) error {
		rec = &r
		return nil
	})
	if errors.Is(err, ledger.ErrTruncated) {
		return nil // a sync rebuilds this cache from a snapshot anyway
	}
	if err != nil {
		return fmt.Errorf("read the commit at the HWM %d: %w", hwm, err)
	}
	if rec == nil || rec.Skip != nil || !rec.LastOfCommit() {
		return nil
	}
	ev := rec.Event
	fork := &ForkError{Seq: hwm, Got: ev.Commit, Head: hwm, HWM: hwm}
	mk, err := h.db.Mark(ev.Partition)
	if err != nil {
		return err
	}
	switch {
	case mk.Seq < hwm, mk.Seq == hwm && mk.ModelSeq != ev.ModelSeq:
		return fork
	case mk.Seq == hwm:
		for _, e := range ev.Entries { // a manifest's entries are not read for this
			row, ok, err := h.rows.Get(e.Path)
			if err != nil {
				return err
			}
			switch {
			case ok && row.Seq > hwm:
			case e.Deleted && ok, !e.Deleted && (!ok || row.Seq != hwm || row.Digest != e.SHA256):
				return fork
			}
		}
	}
	c := statedb.Commit{Seq: hwm, ID: ev.Commit}
	if err := h.db.Update(func(tx *statedb.Tx) error { return tx.SetTopCommit(c) }); err != nil {
		return fmt.Errorf("record the HWM's commit: %w", err)
	}
	h.log.Info("recorded the commit at this cache's HWM", "seq", hwm, "commit", ev.Commit)
	return nil
}

// checkLastCommit checks the top commit against the log without asking for
// its head (a commit about to publish, a watch about to apply): the log's
// commit at that seq, one request, and the messages above it up to the HWM
// (checkSkipped) when there are; nothing when it is not recorded.
func (h *Host) checkLastCommit(ctx context.Context) error {
	c, err := h.db.TopCommit()
	if err != nil || !c.Known() {
		return err
	}
	_, hwm, err := h.db.HWM()
	if err != nil {
		return err
	}
	if err := h.checkCommit(ctx, c, c.Seq, hwm); err != nil {
		return err
	}
	return h.checkSkipped(ctx, c, c.Seq, hwm)
}
