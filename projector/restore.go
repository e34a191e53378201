package projector

import (
	"fmt"
	"maps"

	"github.com/syncledger/syncledger/ledger"
)

// Restore stages a reset of the durable state to to, a state another host
// persisted (a snapshot): the Ready it leads to has Reset set and replaces the
// index, marks and HWM whole, so they may move back (a rebuild starts a new
// state). Its Changes write every file of to (OpWrite, or OpLazy under
// Config.Lazy as Step would decide; a file the cache already holds is kept by
// the shell), delete every file of the old index that to does not hold, and
// remove each stray path (files the shell knows an interrupted apply may have
// left, its journal) that neither holds. seqs gives the seq of the event that
// wrote each file of to (Change.Seq); a missing one is 0.
//
// to must be of the core's lineage (or the core has none yet, and adopts it).
// Restore fails with ErrReadyOutstanding while other work is staged or outstanding: a
// restore is a Ready of its own.
func (c *Core) Restore(to State, seqs map[string]ledger.Seq, stray []string) error {
	if c.out != nil || c.HasReady() {
		return fmt.Errorf("restore to seq %d: staged work not advanced: %w", to.HWM, ErrReadyOutstanding)
	}
	if err := to.validate(); err != nil {
		return fmt.Errorf("restore to seq %d: %w", to.HWM, err)
	}
	switch lin := c.viewLineage(); {
	case to.Ledger == "":
		return fmt.Errorf("restore to seq %d: state without a ledger: %w", to.HWM, ledger.ErrInvalid)
	case lin != "" && lin != to.Ledger:
		return fmt.Errorf("restore: state of ledger %s, this host's is ledger %s: %w", to.Ledger, lin, ledger.ErrLineage)
	case lin == "":
		c.pend.ledger = to.Ledger
	}
	files := make(map[string]fileOp, len(to.Files))
	err := c.files("", func(p string, _ File) bool {
		files[p] = fileOp{op: OpDelete}
		return true
	})
	if err != nil {
		return fmt.Errorf("restore to seq %d: %w", to.HWM, err)
	}
	for _, p := range stray {
		if err := ledger.ValidatePath(p); err != nil {
			return fmt.Errorf("restore: stray path: %w", err)
		}
		files[p] = fileOp{op: OpDelete}
	}
	for p, f := range to.Files {
		op, err := c.target(Full, seqs[p], ledger.Entry{Path: p, SHA256: f.SHA256, Size: f.Size, Mode: f.Mode})
		if err != nil {
			return fmt.Errorf("restore to seq %d: %w", to.HWM, err)
		}
		files[p] = op
	}
	c.pend.reset, c.pend.hwm = true, to.HWM
	c.pend.files = files
	c.pend.marks = maps.Clone(to.Marks)
	return nil
}
