package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/cachefs"
)

// The write pipeline. A Commit is one push: plan → stage → publish → record,
// shaped like the read side's Ready/Advance (package projector). The push
// (its state: the groups of the change left to plan, the rounds spent, what
// was published) hands the shell the next group to plan (next); the shell
// plans it — a scan of the group's partitions, each path admitted (admit:
// one every host can hold, of a partition an event can carry), each changed
// file staged (its content stored, the file fsynced) while the scan holds it
// open, the work done ahead taken (CommitOptions.Prepared) — splits
// what it found into atomic commits, publishes each (the content flushed
// first, then the append, to the write endpoint: writeLog) and records it
// (the core's RecordOwn, the index);
// then it hands the outcome back (advance), and the push, under its one
// Policy, says what comes next: the next group, the same group again after a
// catch-up (a chain conflict), or the end, with the error that stopped it.
// Nothing recurses; every stage takes values and returns values; the options
// are read, never changed, and the result is folded in one place (advance).

// admit is the plan's path admission: whether a push may publish the
// cache's path rel (slash-separated) — every host can hold it
// (ledger.ValidatePath: no reserved name — the state directory, the ignore
// file as a directory, either spelt in another case —, no name or path too
// long for some host, no control character, backslash, "." or ".."
// segment), and an event can carry its partition
// (ledger.CheckPartitionToken). The scan asks it of each file the index
// does not vouch for (scanner.visit: a file as its row records it was
// admitted when recorded); a refused path is not synced: warned of, never
// hashed nor published, nothing at or below it a deletion. The walk applies its
// first rule to directories as it goes (cachefs), leaving a refused one out
// whole with one warning; a deletion's path is an index row's, admitted
// when it was recorded. A push that names its paths (CommitOptions.Paths:
// resolve --mine) publishes only those of the admitted changes (plan).
func admit(rel string) error {
	if err := ledger.ValidatePath(rel); err != nil {
		return err
	}
	return ledger.CheckPartitionToken(ledger.PartitionKey(rel))
}

// group is what one plan covers: the options' scope, or, for a change of
// more files than a commit holds, a group of its partitions (holdGroups).
type group struct {
	parts   partitions
	changed []string // CommitOptions.Changed: nil scans the whole scope
	bound   scanBound
	stored  map[ledger.Digest]bool // content stored already: not staged again
	message string                 // its commits' message, before "(part i of n)"
	done    int                    // commits of this group published so far
}

// plan is what the plan stage found in a group: the commits that publish
// it, or, past the scan's hold, the counts to split it by.
type plan struct {
	commits []pending
	// over, overDeleted and staged: the scan found more changes than it
	// holds (scanned.over); staged is the content it stored before that.
	over        map[string]int
	overDeleted map[string]bool
	staged      map[ledger.Digest]bool
}

// pending is one atomic commit to publish: its changes (sorted by path),
// what the scan saw of their files, its message, and the batch holding its
// content (nil: a new one for its manifests).
type pending struct {
	changes []ledger.Entry
	infos   map[string]cachefs.FileInfo
	message string
	content *ledger.BlobBatch
}

// published is a commit the log stored: its events, at seqs.
type published struct {
	pending
	id     string
	events []ledger.Event
	seqs   []ledger.Seq
	fences []ledger.Fence // the locks it was appended under (RecordOwn)
}

// recorded is a published commit once recorded: its part of the result,
// its paths, partitions and bytes written, and the HWM after it.
type recorded struct {
	part       CommitPart
	paths      []string
	partitions []string // one per event, in the events' order
	bytes      int64
	hwm        ledger.Seq
}

// outcome is what the shell did with one plan: the commits it published
// and recorded, in order, and the error that stopped it — with conflicted,
// the changes of the commit that met a chain conflict.
type outcome struct {
	plan       plan
	recorded   []recorded
	err        error
	conflicted []ledger.Entry
}

// step is what the push says the shell does next.
type step int

const (
	stepPlan    step = iota // plan the next group (next)
	stepCatchUp             // catch up with the conflicted commit's partitions, then plan its group again
	stepSettle              // settle the conflict (CommitOptions.Settle), then plan the whole scope again
	stepDone                // nothing left: the push succeeded
	stepFail                // the push stops with the outcome's error
)

// push is one Commit's pipeline state.
type push struct {
	opt    CommitOptions
	policy Policy
	scope  group   // the whole change: the first group, and the one planned again after a settle
	queue  []group // the groups left to plan; the first is the one planned now
	// conflicts counts the chain conflicts the commit being published met
	// since the last one published (Policy.Conflicts); settles the conflicts
	// settled (Policy.Settles).
	conflicts, settles int
	res                CommitResult
}

// newPush starts the push of opt: one group, the options' scope.
func newPush(opt CommitOptions, policy Policy, hold int) *push {
	bound := scanBound{hold: hold}
	if len(opt.Paths) > 0 {
		bound.hold = 0 // a few paths, picked from the whole change
	}
	g := group{parts: partitionFilter(opt.Partitions), changed: opt.Changed, bound: bound, message: opt.Message}
	return &push{opt: opt, policy: policy, scope: g, queue: []group{g}}
}

// next returns the group to plan next; false: nothing is left.
func (p *push) next() (group, bool) {
	if len(p.queue) == 0 {
		return group{}, false
	}
	p.res.Attempts++
	return p.queue[0], true
}

// advance folds the outcome of planning and publishing the first group into
// the push, and says what comes next under the policy, with the error that
// stops it (stepFail) or the conflict to settle (stepSettle). maxParts is
// the most partitions a commit holds, hold the most files.
func (p *push) advance(o outcome, maxParts, hold int) (step, error) {
	for _, r := range o.recorded {
		p.res = p.res.with(r, p.opt.MaxPaths)
		p.queue[0].done++
		p.conflicts = 0 // each commit has its own rounds
	}
	switch f := p.policy.classify(o.err); {
	case f == failNone && o.plan.over != nil:
		p.queue = append(p.split(o.plan, maxParts, hold), p.queue[1:]...)
		return stepPlan, nil
	case f == failNone:
		p.queue = p.queue[1:]
		if len(p.queue) == 0 {
			return stepDone, nil
		}
		return stepPlan, nil
	case f == failChain && o.conflicted != nil:
		p.conflicts++
		if p.conflicts >= p.policy.conflicts() {
			return stepFail, fmt.Errorf("commit: gave up after %d attempts: %w", p.conflicts, o.err)
		}
		return stepCatchUp, nil
	case f == failPaths && p.opt.Settle != nil && p.settles < p.policy.settles():
		p.settles++
		return stepSettle, o.err // the conflict to settle
	}
	// A lost lock, a refusal, no answer, anything else: returned at once.
	return stepFail, o.err
}

// settled starts the push again once a conflict was settled: the whole
// scope, scanned whole (what a settlement moves is new paths).
func (p *push) settled() {
	g := p.scope
	g.changed = nil
	p.queue, p.conflicts = []group{g}, 0
}

// split replaces the first group, whose scan found more files than a commit
// holds, by the groups of its partitions (holdGroups) of at most an eighth
// of the hold's files — a change this large is not one atomic commit
// anyway, and a commit's memory grows with its files — each group's scan
// covering only its partitions and holding what it finds, the content the
// first scan stored not stored again, and a group whose partitions the first
// walk found no deletion in reading no index for deletions.
func (p *push) split(pl plan, maxParts, hold int) []group {
	first := p.queue[0]
	stored := first.stored
	if len(pl.staged) > 0 {
		stored = maps.Clone(first.stored)
		if stored == nil {
			stored = map[ledger.Digest]bool{}
		}
		maps.Copy(stored, pl.staged)
	}
	parts := holdGroups(pl.over, maxParts, max(1, hold/8))
	before := len(p.res.Commits)
	groups := make([]group, len(parts))
	for i, g := range parts {
		groups[i] = group{
			parts:   partitionFilter(g),
			changed: first.changed,
			bound:   scanBound{noDeletions: !slices.ContainsFunc(g, func(p string) bool { return pl.overDeleted[p] })},
			stored:  stored,
			message: first.message,
		}
		if len(parts) > 1 {
			groups[i].message = PartMessage(first.message, before+i+1, before+len(parts))
		}
	}
	return groups
}

// with returns r with the recorded commit rc added (its paths while r
// holds fewer than maxPaths, when positive).
func (r CommitResult) with(rc recorded, maxPaths int) CommitResult {
	for _, p := range rc.paths {
		if maxPaths > 0 && len(r.Paths) >= maxPaths {
			break
		}
		r.Paths = append(r.Paths, p)
	}
	r.Commit, r.HWM = rc.part.Commit, rc.hwm
	r.Commits = append(r.Commits, rc.part)
	r.Seqs = append(r.Seqs, rc.part.Seqs...)
	r.Partitions = append(r.Partitions, rc.partitions...)
	r.Written += rc.part.Written
	r.Deleted += rc.part.Deleted
	r.Bytes += rc.bytes
	return r
}

// runPush runs the pipeline of p on the session s to its end.
func (h *Host) runPush(ctx context.Context, s *session, p *push) (CommitResult, error) {
	maxParts := h.commitPartitions(p.opt)
	for {
		g, ok := p.next()
		if !ok {
			break
		}
		o := h.planAndPublish(ctx, s, p, g, maxParts)
		st, err := p.advance(o, maxParts, h.cfg.CommitHold)
		for st == stepCatchUp || st == stepSettle {
			if st == stepCatchUp {
				st, err = h.catchUpPush(ctx, s, p, o)
				continue
			}
			if s, err = h.settle(ctx, p, err); err != nil {
				return p.res, err
			}
			st = stepPlan
		}
		if st == stepFail {
			return p.res, err
		}
	}
	p.res.Nothing, p.res.HWM = len(p.res.Commits) == 0, s.core.HWM()
	return p.res, nil
}

// settle settles the conflict err (a *ConflictError) with the options'
// Settle, and returns a new session (a settlement syncs, moving the state)
// for the push to plan its whole scope again.
func (h *Host) settle(ctx context.Context, p *push, err error) (*session, error) {
	var ce *ConflictError
	errors.As(err, &ce)
	if err := p.opt.Settle(ctx, ce); err != nil {
		return nil, err
	}
	s, err := h.load(ctx, false)
	if err != nil {
		return nil, err
	}
	p.settled()
	return s, nil
}

// catchUpPush reads and applies the new events of the partitions of the
// commit that met a chain conflict, then waits the policy's backoff: the
// group is planned again next. A change of those events to a path the
// commit changes (a *ConflictError) goes back to the push (advance).
func (h *Host) catchUpPush(ctx context.Context, s *session, p *push, o outcome) (step, error) {
	var ce *ledger.ConflictError
	errors.As(o.err, &ce)
	h.log.Info("chain moved, syncing touched partitions", "partition", ce.Partition, "attempt", p.conflicts)
	pulled, err := h.catchUp(ctx, s, o.conflicted)
	p.res.Pulled += pulled
	if err != nil {
		return p.advance(outcome{err: err}, 0, 0)
	}
	if err := ledger.SleepCtx(ctx, p.policy.backoff(p.conflicts, h.cfg.Now())); err != nil {
		return stepFail, err
	}
	return stepPlan, nil
}

// planAndPublish plans group g (plan), then publishes and records its
// commits in order until one fails.
func (h *Host) planAndPublish(ctx context.Context, s *session, p *push, g group, maxParts int) outcome {
	pl, err := h.plan(ctx, s, p.opt, g, maxParts)
	o := outcome{plan: pl, err: err}
	if err != nil || pl.over != nil {
		return o
	}
	for i, c := range pl.commits {
		if i > 0 {
			c.content = h.blobsPort().Batch() // the commit's manifests
		}
		pub, err := h.publish(ctx, s, c, p.opt, h.writeLog())
		if err != nil {
			o.err = err
			if errors.As(err, new(*ledger.ConflictError)) {
				o.conflicted = c.changes
			}
			return o
		}
		for _, e := range c.changes {
			if !e.Deleted {
				p.opt.Prepared.store(e.SHA256) // published: its content is durable
			}
		}
		rc, err := h.record(ctx, s, pub)
		if err != nil {
			o.err = err
			return o
		}
		o.recorded = append(o.recorded, rc)
	}
	return o
}

// plan scans group g — each path admitted (admit), each changed file staged
// while the scan holds it open (commitStage: its content into a batch, the
// file fsynced) — and splits the changes into the commits that publish them
// (batches), the first carrying the batch. Past the scan's hold, what it staged is made
// durable and the plan carries the counts to split the group by.
func (h *Host) plan(ctx context.Context, s *session, opt CommitOptions, g group, maxParts int) (plan, error) {
	content := h.blobsPort().Batch() // flushed by the first publish
	bound := g.bound
	bound.known = opt.Prepared
	sc, err := h.scan(s, g.parts, g.changed, h.commitStage(ctx, g.stored, opt.Prepared, content), bound)
	if err != nil {
		return plan{}, err
	}
	if sc.over != nil {
		// What the scan staged before it stopped is made durable now: the
		// groups' commits name it without storing it again (group.stored).
		if err := content.Flush(ctx); err != nil {
			return plan{}, fmt.Errorf("commit: %w", err)
		}
		return plan{over: sc.over, overDeleted: sc.overDeleted, staged: sc.staged}, nil
	}
	changes := sc.changes // admitted (admit)
	if len(opt.Paths) > 0 {
		changes = slices.DeleteFunc(changes, func(e ledger.Entry) bool { return !slices.Contains(opt.Paths, e.Path) })
	}
	if len(changes) == 0 {
		return plan{}, nil
	}
	h.fp.at("commit-after-scan")
	bs := batches(changes, maxParts)
	n := g.done + len(bs)
	pl := plan{commits: make([]pending, len(bs))}
	for i, b := range bs {
		msg := g.message
		if n > 1 {
			msg = PartMessage(g.message, g.done+i+1, n)
		}
		pl.commits[i] = pending{changes: b, infos: sc.infos, message: msg}
	}
	pl.commits[0].content = content
	return pl, nil
}

// writeLog is the publish stage's write endpoint: the log its appends go to,
// the ledger's origin. It is the host's log port (Config.Log, watched while
// the operation runs), whose Append goes to the origin whatever the log
// reads from: a log of a region's host that reads a mirror (natsjs.Config's
// Read endpoint) appends through its Write endpoint to the origin, and never
// reads below its own appends after (ledger.CommitLog.Head;
// TestRegionHostSeesItsCommit). The pipeline's other requests — the last
// commit's check, a catch-up's reads — are reads, from where the log reads
// (TestPublishWritesToTheOrigin).
func (h *Host) writeLog() ledger.CommitLog { return h.fp.log(h.logPort()) }

// publish makes one commit durable — its files, then the blobs of its
// content, its batch — and appends its events under opt's fences to w, the
// write endpoint (writeLog).
func (h *Host) publish(ctx context.Context, s *session, c pending, opt CommitOptions, w ledger.CommitLog) (published, error) {
	id, err := ledger.NewCommitID(h.cfg.Rand)
	if err != nil {
		return published{}, err
	}
	if !s.checked {
		// Never publish on top of a history the log no longer holds
		// (identity.go): a sync heals it first.
		if err := h.checkLastCommit(ctx); err != nil {
			return published{}, fmt.Errorf("commit: %w", err)
		}
		s.checked = true
	}
	cm := ledger.Commit{ID: id, Host: h.cfg.Host, At: h.cfg.Now(), Message: c.message, Entries: c.changes}
	events, err := s.core.CommitEvents(cm)
	if err != nil {
		return published{}, fmt.Errorf("commit: %w", err)
	}
	if err := h.syncCommitted(c.changes); err != nil {
		return published{}, err
	}
	// The content is stored (the plan's stage, in content) and the files are
	// durable: publish, the batch flushed and the manifests stored first.
	seqs, err := ledger.PublishBatch(ctx, w, c.content, events, opt.Fences...)
	if err != nil {
		return published{}, err
	}
	h.fp.at("commit-after-append")
	return published{pending: c, id: id, events: events, seqs: seqs, fences: opt.Fences}, nil
}

// record records a published commit — the core's RecordOwn, then the index
// rows, marks and HWM persisted — and says what it was.
func (h *Host) record(ctx context.Context, s *session, pub published) (recorded, error) {
	if err := s.core.RecordOwn(pub.events, pub.seqs, pub.fences...); err != nil {
		return recorded{}, fmt.Errorf("record commit %s (published at seqs %v): %w", pub.id, pub.seqs, err)
	}
	for i, ev := range pub.events {
		s.staged(ledger.Record{Seq: pub.seqs[i], Event: ev})
	}
	flushed := make(map[string]bool, len(pub.changes))
	for _, e := range pub.changes {
		flushed[e.Path] = true
	}
	rd, err := s.core.Ready()
	if err == nil {
		_, err = h.applyOwn(ctx, s, rd, pub.infos, flushed)
	}
	if err != nil {
		return recorded{}, fmt.Errorf("record commit %s (published at seqs %v): %w", pub.id, pub.seqs, err)
	}
	h.fp.at("commit-after-persist")
	rc := recorded{part: CommitPart{Commit: pub.id, Seqs: pub.seqs, Partitions: len(pub.events)}, hwm: s.core.HWM(),
		paths: make([]string, len(pub.changes)), partitions: make([]string, len(pub.events))}
	for i, e := range pub.changes {
		rc.paths[i] = e.Path
		if e.Deleted {
			rc.part.Deleted++
		} else {
			rc.part.Written++
			rc.bytes += e.Size
		}
	}
	for i, ev := range pub.events {
		rc.partitions[i] = ev.Partition
	}
	return rc, nil
}
