package projector

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/syncledger/syncledger/ledger"
)

// TestScripts runs the interaction scripts in testdata/*.txt. Each script has one
// model log and any number of hosts, each a Core plus the state its shell
// persisted ("disk"). Regenerate the expected outputs with -rewrite (and review
// the diff).
//
// Commands:
//
//	new host=A [lazy]             a host with an empty state
//	adopt host=A [ledger=other]   AdoptLineage with the log's Info (or another ledger's)
//	append [by=writer]            a remote commit on the log's heads; input lines:
//	                              "<path> <content>" or "<path> -" (deletion)
//	full host=A [to=N]            offer records HWM+1..N (default head) as Full
//	scoped host=A part=P[,Q] [to=N]  offer each partition's records from its mark
//	offer host=A mode=M seq=S[,T]    offer the given records
//	own host=A                    CommitEvents + append + RecordOwn; input as append
//	hydrate host=A path=P[,Q]
//	ready host=A                  print the Ready (it becomes outstanding)
//	advance host=A                Ready, persist it to disk, Advance; print both
//	discard host=A | restart host=A (New from disk) | state host=A
//	lag host=A                    the sync fast path: log head vs HWM
//	safehwm hwm=N                 input: processed seqs, "5" or "5e" (commit end)
//	touched seq=S[,T]
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := &scriptEnv{log: newMemLog(testLedger), hosts: map[string]*scriptHost{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := env.run(d)
			if err != nil {
				out += "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

type scriptHost struct {
	core *Core
	cfg  Config
	disk State
}

type scriptEnv struct {
	log   *memLog
	hosts map[string]*scriptHost
}

func (env *scriptEnv) run(d *datadriven.TestData) (string, error) {
	args := map[string][]string{}
	for _, a := range d.CmdArgs {
		args[a.Key] = a.Vals
	}
	one := func(k string) string {
		if v := args[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	seqArg := func(k string) ledger.Seq {
		n, _ := strconv.ParseUint(one(k), 10, 64)
		return ledger.Seq(n)
	}
	var h *scriptHost
	if name := one("host"); name != "" && d.Cmd != "new" {
		if h = env.hosts[name]; h == nil {
			return "", fmt.Errorf("no host %q", name)
		}
	}
	var b strings.Builder
	switch d.Cmd {
	case "new":
		cfg := Config{Lazy: d.HasArg("lazy")}
		c, err := newCoreOf(State{}, cfg)
		if err != nil {
			return "", err
		}
		env.hosts[one("host")] = &scriptHost{core: c, cfg: cfg, disk: State{}.Clone()}
		return "ok\n", nil

	case "adopt":
		info := env.log.info
		if one("ledger") == "other" {
			info.UUID = otherLedger
		}
		if err := h.core.AdoptLineage(info); err != nil {
			return "", err
		}
		return "ok\n", nil

	case "append":
		by := one("by")
		if by == "" {
			by = "writer"
		}
		seqs, err := env.log.commitRemote(by, env.entries(d.Input))
		if err != nil {
			return "", err
		}
		for _, s := range seqs {
			b.WriteString(env.recString(env.log.rec(s)) + "\n")
		}
		return b.String(), nil

	case "full":
		return env.offer(h, Full, env.log.read(h.core.HWM()+1, seqArg("to")))

	case "scoped":
		var recs []ledger.Record
		for _, p := range args["part"] {
			recs = append(recs, env.log.readPartition(p, h.core.mustMark(p).Seq+1, seqArg("to"))...)
		}
		return env.offer(h, Scoped, recs)

	case "offer":
		mode := Full
		if one("mode") == "scoped" {
			mode = Scoped
		}
		var recs []ledger.Record
		for _, v := range args["seq"] {
			n, _ := strconv.Atoi(v)
			recs = append(recs, env.log.rec(ledger.Seq(n)))
		}
		return env.offer(h, mode, recs)

	case "own":
		evs, err := h.core.CommitEvents(env.log.newCommit(one("host"), env.entries(d.Input)))
		if err != nil {
			return "", err
		}
		seqs, err := env.log.append(evs)
		if err != nil {
			return "", err
		}
		for _, s := range seqs {
			b.WriteString(env.recString(env.log.rec(s)) + "\n")
		}
		if err := h.core.RecordOwn(evs, seqs); err != nil {
			return b.String(), err
		}
		return b.String() + "recorded\n", nil

	case "hydrate":
		if err := h.core.Hydrate(args["path"]...); err != nil {
			return "", err
		}
		return "ok\n", nil

	case "ready":
		return env.readyString(h, h.core.mustReady()), nil

	case "advance":
		rd := h.core.mustReady()
		b.WriteString(env.readyString(h, rd))
		persist(&h.disk, rd)
		h.core.persistAdvance(rd)
		if got := h.core.mustState(); !equalState(got, h.disk) {
			return b.String(), fmt.Errorf("core state %+v differs from persisted %+v", got, h.disk)
		}
		b.WriteString(env.stateString(h.disk))
		return b.String(), nil

	case "discard":
		h.core.Discard()
		return "ok\n", nil

	case "restart":
		c, err := newCoreOf(h.disk, h.cfg)
		if err != nil {
			return "", err
		}
		h.core = c
		return env.stateString(h.disk), nil

	case "state":
		return env.stateString(h.core.mustState()), nil

	case "lag":
		// The sync fast path: one request for the log's last seq.
		if head := env.log.head(); head != h.core.HWM() {
			return fmt.Sprintf("behind: hwm %d, head %d: a full sync reads %d..%d\n", h.core.HWM(), head, h.core.HWM()+1, head), nil
		}
		return "up to date\n", nil

	case "safehwm":
		var done []Done
		for _, f := range strings.Fields(d.Input) {
			end := strings.HasSuffix(f, "e")
			n, err := strconv.ParseUint(strings.TrimSuffix(f, "e"), 10, 64)
			if err != nil {
				return "", err
			}
			done = append(done, Done{Seq: ledger.Seq(n), CommitEnd: end})
		}
		return fmt.Sprintf("%d\n", SafeHWM(seqArg("hwm"), done)), nil

	case "touched":
		var recs []ledger.Record
		for _, v := range args["seq"] {
			n, _ := strconv.Atoi(v)
			recs = append(recs, env.log.rec(ledger.Seq(n)))
		}
		return strings.Join(Touched(recs...), "\n") + "\n", nil
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

// offer steps the records in order and prints each verdict; it stops at the
// first error.
func (env *scriptEnv) offer(h *scriptHost, m Mode, recs []ledger.Record) (string, error) {
	var b strings.Builder
	if len(recs) == 0 {
		return "nothing to read\n", nil
	}
	for _, r := range recs {
		v, err := h.core.Step(m, r)
		if err != nil {
			var gap *GapError
			if errors.As(err, &gap) {
				fmt.Fprintf(&b, "%s: gap: read %s seqs %d..%d\n", env.recString(r), gap.Partition, gap.From, gap.To)
				return b.String(), nil
			}
			fmt.Fprintf(&b, "%s:\n", env.recString(r))
			return b.String(), err
		}
		fmt.Fprintf(&b, "%s: %v\n", env.recString(r), v)
	}
	return b.String(), nil
}

// entries parses "<path> <content>" / "<path> -" lines.
func (env *scriptEnv) entries(input string) []ledger.Entry {
	var es []ledger.Entry
	for _, line := range strings.Split(input, "\n") {
		path, content, _ := strings.Cut(strings.TrimSpace(line), " ")
		if path == "" {
			continue
		}
		if content == "-" {
			es = append(es, del(path))
		} else {
			es = append(es, env.log.write(path, content))
		}
	}
	return es
}

// persist is the shell's transaction: it applies rd to the persisted state.
func persist(disk *State, rd Ready) {
	if rd.Ledger != "" {
		disk.Ledger = rd.Ledger
	}
	for _, ch := range rd.Changes {
		if ch.New == nil {
			delete(disk.Files, ch.Path)
		} else {
			disk.Files[ch.Path] = *ch.New
		}
	}
	maps.Copy(disk.Marks, rd.Marks)
	disk.HWM = rd.HWM
}

func equalState(a, b State) bool {
	return a.Ledger == b.Ledger && a.HWM == b.HWM && maps.Equal(a.Marks, b.Marks) && maps.Equal(a.Files, b.Files)
}

func (env *scriptEnv) lineage(uuid string) string {
	switch uuid {
	case "":
		return "-"
	case testLedger:
		return "L1"
	case otherLedger:
		return "L2"
	}
	return uuid
}

func commitLabel(id string) string {
	n, err := strconv.ParseUint(id[len(id)-12:], 16, 64)
	if err != nil {
		return id
	}
	return fmt.Sprintf("c%d", n)
}

func (env *scriptEnv) recString(r ledger.Record) string {
	e := r.Event
	var es []string
	for _, en := range e.Entries {
		if en.Deleted {
			es = append(es, en.Path+" -")
		} else {
			es = append(es, en.Path+"="+env.log.blobs[en.SHA256])
		}
	}
	return fmt.Sprintf("seq %d %s#%d prev %d %s %d/%d [%s]", r.Seq, e.Partition, e.ModelSeq, e.Prev,
		commitLabel(e.Commit), e.Part, e.Parts, strings.Join(es, " "))
}

func (env *scriptEnv) fileString(f *File) string {
	if f == nil {
		return "-"
	}
	s := fmt.Sprintf("%s/%o", env.log.blobs[f.SHA256], f.Mode)
	if f.Lazy {
		s += " lazy"
	}
	return s
}

func (env *scriptEnv) readyString(h *scriptHost, rd Ready) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ready: hwm %d -> %d", h.core.HWM(), rd.HWM)
	if rd.Ledger != "" {
		fmt.Fprintf(&b, ", adopt ledger %s", env.lineage(rd.Ledger))
	}
	b.WriteString("\n")
	for _, ch := range rd.Changes {
		fmt.Fprintf(&b, "  %-6s %s: %s -> %s (seq %d)\n", ch.Op, ch.Path, env.fileString(ch.Old), env.fileString(ch.New), ch.Seq)
	}
	for _, p := range slices.Sorted(maps.Keys(rd.Marks)) {
		fmt.Fprintf(&b, "  mark   %s: %d@%d\n", p, rd.Marks[p].ModelSeq, rd.Marks[p].Seq)
	}
	return b.String()
}

func (env *scriptEnv) stateString(s State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state: ledger %s hwm %d\n", env.lineage(s.Ledger), s.HWM)
	for _, p := range slices.Sorted(maps.Keys(s.Marks)) {
		fmt.Fprintf(&b, "  mark %s: %d@%d\n", p, s.Marks[p].ModelSeq, s.Marks[p].Seq)
	}
	for _, p := range slices.Sorted(maps.Keys(s.Files)) {
		f := s.Files[p]
		fmt.Fprintf(&b, "  file %s: %s\n", p, env.fileString(&f))
	}
	return b.String()
}
