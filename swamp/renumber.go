package swamp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/syncledger/syncledger/internal/fsx"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/projector/host"
	"github.com/syncledger/syncledger/projector/statedb"
)

// swamp's data layout in a datastore's cache (swamp-club/swamp
// src/infrastructure/persistence/unified_data_repository.ts and
// src/domain/models/model_output.ts):
//
//	data/{type}/{modelId}/{name}/{version}/metadata.yaml  its top-level "version: N" is the directory's number
//	data/{type}/{modelId}/{name}/{version}/raw            the content
//	data/{type}/{modelId}/{name}/latest                   "N": the version read by default
//	outputs/{type}/{method}/{modelId}-{time}.yaml         a run's record: artifacts.dataArtifacts[] {dataId, name, version}
//	workflow-runs/{workflowId}/workflow-run-{runId}.yaml  a workflow run's: jobs[].steps[].dataArtifacts[] likewise;
//	                                                      its step's data carry tags workflowId and workflowRunId
//
// A host allocates a data name's next version from the versions in its own
// cache (atomicAllocateVersionDir), so two hosts that run one model while
// apart (a run whose push could not reach the ledger, then the other host's
// run) both write version N. Every version has an id of its own
// (metadata.yaml "id"), and no run's files name another run's.
//
// Besides, swamp writes some files again on every command: the evaluated
// definitions and workflows, each data name's latest marker, a namespace's
// catalog export. Two hosts' copies of them differ only in what the next
// command writes anyway.

// SetAsideDir is the directory, under the cache's state directory, where
// SyncRenumbered keeps this host's versions while the ledger's take their
// numbers: swamp-renumber/{time}/data/…/{name}/{version}/, listed in
// swamp-renumber/{time}/moves.json before any is moved. A crash leaves them
// there; the next SyncRenumbered places them.
const SetAsideDir = "swamp-renumber"

// movesFile lists, in a set-aside directory, the versions set aside there.
const movesFile = "moves.json"

// Renumbered says what SyncRenumbered settled.
type Renumbered struct {
	// Moved lists this host's versions moved past the ledger's, in order.
	Moved []Move `json:"moved,omitempty"`
	// Regenerated lists swamp's regenerated files whose ledger version was
	// taken over this host's.
	Regenerated []string `json:"regenerated,omitempty"`
	// Duplicates lists this host's versions set aside that the ledger holds
	// already under another number (another host republished the run after
	// a server restore): dropped, as Move{From: this host's number, To: the
	// ledger's}.
	Duplicates []Move `json:"duplicates,omitempty"`
}

// Move is one data version of this host's run moved to another number.
type Move struct {
	Data string `json:"data"` // the data name's directory, data/{type}/{modelId}/{name}
	From int    `json:"from"`
	To   int    `json:"to"`
}

// versionFile splits rel, a file in a data version's directory, into the
// data name's directory and the version.
func versionFile(rel string) (data string, v int, ok bool) {
	parts := strings.Split(rel, "/")
	// data, at least one type segment, the model id, the name, the version, the file.
	if len(parts) < 6 || parts[0] != "data" {
		return "", 0, false
	}
	v, ok = versionName(parts[len(parts)-2])
	return strings.Join(parts[:len(parts)-2], "/"), v, ok
}

// versionName parses a version directory's name: a positive decimal number,
// as swamp writes it.
func versionName(s string) (int, bool) {
	v, err := strconv.Atoi(s)
	return v, err == nil && v > 0 && strconv.Itoa(v) == s
}

// Regenerated reports whether swamp writes rel again on every command that
// touches it: an evaluated definition or workflow, a data name's latest
// marker (set again from the versions after a renumbering), a namespace's
// catalog export.
func Regenerated(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	switch {
	case first == "definitions-evaluated" || first == "workflows-evaluated":
		return true
	case first == "data":
		return path.Base(rel) == "latest" && strings.Count(rel, "/") >= 4
	}
	return rel == ".catalog-export.json"
}

// SyncRenumbered syncs h (h.Sync) and settles, as swamp would had the hosts
// not been apart, what the sync refuses to overwrite (host.LocalChangesError)
// where swamp's layout says how:
//
//   - a data version this host wrote and never published, whose number the
//     ledger now holds (another host published its own run there first), is
//     set aside with this host's later unpublished versions of that data name;
//     once the ledger's are synced they are placed after the highest version,
//     in order, each directory renamed and its metadata.yaml's version set,
//     the data name's latest marker set to the highest version, and the run
//     records that name them updated (the model's outputs/ records, and a
//     workflow step's workflow-runs/ record);
//   - a file swamp regenerates (Regenerated) takes the ledger's version.
//
// Both runs stay: the ledger's under its number, this host's under the next
// free ones, for its next commit to publish. Any other local change the ledger
// changed too stays a *host.LocalChangesError, for the user to resolve.
//
// A sync that heals the cache of a ledger that lost commits (host/heal.go: a
// server restored from an older backup) puts a data version's files back,
// or keeps them aside, together (Together); a version kept aside because the
// ledger holds another run under its number since is moved past the ledger's
// the same way — unless the ledger holds that very version already under
// another number (another host republished it first: Duplicates). The caller
// publishes what went back (opt.NoRepublish is set): CommitRenumbered.
func SyncRenumbered(ctx context.Context, h *host.Host, opt host.SyncOptions) (host.SyncResult, Renumbered, error) {
	var rn Renumbered
	opt.NoRepublish, opt.Together = true, Together
	res, err := h.Sync(ctx, opt)
	if res.Healed != nil && len(res.Healed.Kept) > 0 {
		kerr := renumberKept(h, res.Healed)
		if kerr == nil {
			kerr = dropRegenerated(h, res.Healed, &rn)
		}
		if kerr != nil && err == nil {
			err = kerr
		}
	}
	var le *host.LocalChangesError
	if errors.As(err, &le) {
		var settled bool
		if settled, err = setAside(ctx, h, &rn); err != nil {
			return res, rn, err
		}
		if !settled {
			return res, rn, le
		}
		first := res // what the sync applied before it stopped
		res, err = h.Sync(ctx, opt)
		res.Written += first.Written
		res.Deleted += first.Deleted
	}
	if err != nil {
		return res, rn, err
	}
	// Placed after every sync that succeeds: a crash between setting aside and
	// placing leaves the versions to the next one.
	moved, dups, err := place(h.Dir().Root())
	rn.Moved = append(rn.Moved, moved...)
	rn.Duplicates = append(rn.Duplicates, dups...)
	return res, rn, err
}

// Together is a swamp heal's grouping (host.SyncOptions.Together): the files
// of one data version, data/{type}/{modelId}/{name}/{version}/…, go back or
// stay aside together.
func Together(rel string) string {
	if d, v, ok := versionFile(rel); ok {
		return d + "/" + strconv.Itoa(v)
	}
	return ""
}

// renumberKept moves the data versions a heal kept aside (the ledger holds
// another run under their numbers since) to a set-aside directory of this
// package, listed in its moves.json, for place to move them past the
// ledger's.
func renumberKept(h *host.Host, hd *host.Healed) error {
	root := h.Dir().Root()
	var moves []Move
	seen := map[string]bool{}
	for _, p := range hd.Kept {
		d, v, ok := versionFile(p)
		if !ok || seen[d+"/"+strconv.Itoa(v)] {
			continue
		}
		seen[d+"/"+strconv.Itoa(v)] = true
		moves = append(moves, Move{Data: d, From: v})
	}
	if len(moves) == 0 {
		return nil
	}
	kept := filepath.Join(root, filepath.FromSlash(hd.KeptIn))
	stamp := filepath.Join(h.Dir().StatePath(SetAsideDir), time.Now().UTC().Format("20060102T150405.000000000Z")+"-rewound")
	if err := os.MkdirAll(stamp, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(moves)
	if err := writeFile(filepath.Join(stamp, movesFile), b); err != nil {
		return err
	}
	for _, m := range moves {
		rel := filepath.FromSlash(m.Data + "/" + strconv.Itoa(m.From))
		dst := filepath.Join(stamp, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(kept, rel), dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("set aside %s, kept by the heal: %w", rel, err)
		}
	}
	// What stays in the heal's directory is what it says it kept.
	hd.Kept = slices.DeleteFunc(hd.Kept, func(p string) bool { _, _, ok := versionFile(p); return ok })
	return nil
}

// dropRegenerated removes from what a heal kept aside the files swamp writes
// again anyway (Regenerated: the latest markers, which place sets, evaluated
// definitions): the ledger's version stands, as SyncRenumbered takes it over
// this host's in any conflict. They are listed in rn.Regenerated.
func dropRegenerated(h *host.Host, hd *host.Healed, rn *Renumbered) error {
	kept := filepath.Join(h.Dir().Root(), filepath.FromSlash(hd.KeptIn))
	var err error
	hd.Kept = slices.DeleteFunc(hd.Kept, func(p string) bool {
		if !Regenerated(p) || err != nil {
			return false
		}
		if rerr := os.Remove(filepath.Join(kept, filepath.FromSlash(p))); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
			return false
		}
		rn.Regenerated = append(rn.Regenerated, p)
		return true
	})
	if len(hd.Kept) == 0 {
		fsx.RemoveEmptyDirs(kept)
		hd.KeptIn = ""
	}
	return err
}

// setAside sets aside this host's unpublished versions whose numbers the
// ledger holds and takes the ledger's version of the regenerated files among
// the cache's conflicts; settled is false when there was none of either.
func setAside(ctx context.Context, h *host.Host, rn *Renumbered) (settled bool, err error) {
	conflicts, err := h.Conflicts(ctx)
	if err != nil {
		return false, err
	}
	root := h.Dir().Root()
	first := map[string]int{} // data name directory → its lowest conflicting version
	var regen []string
	for _, p := range conflicts {
		if d, v, ok := versionFile(p); ok {
			if f, ok := first[d]; !ok || v < f {
				first[d] = v
			}
		} else if Regenerated(p) {
			regen = append(regen, p)
		}
	}
	// The moves are written down before any is made: place finds them there.
	var moves []Move
	for _, d := range slices.Sorted(maps.Keys(first)) {
		vs, err := versions(filepath.Join(root, filepath.FromSlash(d)))
		if err != nil {
			return false, err
		}
		for _, v := range vs {
			if v < first[d] {
				continue
			}
			published, err := anyIndexed(h, d+"/"+strconv.Itoa(v))
			if err != nil {
				return false, err
			}
			if !published {
				// A version the ledger holds is not this host's alone: it
				// stays (the sync names it, for the user).
				moves = append(moves, Move{Data: d, From: v})
			}
		}
	}
	if len(moves) > 0 {
		stamp := filepath.Join(h.Dir().StatePath(SetAsideDir), time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := os.MkdirAll(stamp, 0o700); err != nil {
			return false, err
		}
		b, _ := json.Marshal(moves)
		if err := writeFile(filepath.Join(stamp, movesFile), b); err != nil {
			return false, err
		}
		for _, m := range moves {
			rel := filepath.FromSlash(m.Data + "/" + strconv.Itoa(m.From))
			dst := filepath.Join(stamp, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return false, err
			}
			if err := os.Rename(filepath.Join(root, rel), dst); err != nil {
				return false, fmt.Errorf("set aside %s: %w", rel, err)
			}
		}
		settled = true
	}
	if len(regen) > 0 {
		if _, err := h.Resolve(ctx, host.ResolveOptions{Paths: regen, Discard: true}); err != nil {
			return false, fmt.Errorf("take the ledger's version of files swamp regenerates: %w", err)
		}
		rn.Regenerated = append(rn.Regenerated, regen...)
		settled = true
	}
	return settled, nil
}

// anyIndexed reports whether the index holds a file at or under dir.
func anyIndexed(h *host.Host, dir string) (bool, error) {
	found := false
	err := h.View(func(db *statedb.DB) error {
		var err error
		found, err = db.Under(dir)
		return err
	})
	return found, err
}

// versions lists the version directories of the data name directory dir,
// in increasing order.
func versions(dir string) ([]int, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var vs []int
	for _, de := range des {
		if v, ok := versionName(de.Name()); ok && de.IsDir() {
			vs = append(vs, v)
		}
	}
	slices.Sort(vs)
	return vs, nil
}

// place moves every version set aside under root's SetAsideDir (each
// set-aside directory's movesFile lists them) to the next free numbers of its
// data name, oldest set-aside first.
func place(root string) (moved, dups []Move, err error) {
	base := filepath.Join(root, ".syncledger", SetAsideDir)
	stamps, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, st := range stamps { // in time order
		dir := filepath.Join(base, st.Name())
		var staged []Move // Data and From
		b, err := os.ReadFile(filepath.Join(dir, movesFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return moved, dups, err
		}
		// No list: set aside stopped before it moved anything.
		if err == nil {
			if err := json.Unmarshal(b, &staged); err != nil {
				return moved, dups, fmt.Errorf("%s: %w", filepath.Join(dir, movesFile), err)
			}
		}
		for _, m := range staged {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(m.Data), strconv.Itoa(m.From))); errors.Is(err, fs.ErrNotExist) {
				continue // not set aside yet, or placed already
			}
			to, dup, err := placeOne(root, dir, m)
			if err != nil {
				return moved, dups, err
			}
			m.To = to
			if dup {
				dups = append(dups, m)
			} else {
				moved = append(moved, m)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			return moved, dups, err
		}
	}
	return moved, dups, os.Remove(base)
}

// placeOne moves version m.From of m.Data, set aside under dir, to its data
// name's next free number: its metadata.yaml's version first (set aside, a
// crash leaves it to be placed again), then the directory, then the latest
// marker and the model's run records.
//
// A version whose id a version of the data name already has, with the same
// files (metadata.yaml but for its version), is that version: another host
// republished it first after a server restore. It is dropped, its files the
// other lacks moved there first (dup true, with that version's number).
func placeOne(root, dir string, m Move) (int, bool, error) {
	data := filepath.Join(root, filepath.FromSlash(m.Data))
	vs, err := versions(data)
	if err != nil {
		return 0, false, err
	}
	src := filepath.Join(dir, filepath.FromSlash(m.Data), strconv.Itoa(m.From))
	meta := filepath.Join(src, "metadata.yaml")
	if v, ok, err := sameVersion(data, src, vs); err != nil || ok {
		return v, ok, err
	}
	to := 1
	if len(vs) > 0 {
		to = vs[len(vs)-1] + 1
	}
	var vm versionMeta
	b, err := os.ReadFile(meta)
	switch {
	case err == nil:
		var nb []byte
		nb, vm = renumberMetadata(b, to)
		if err := writeFile(meta, nb); err != nil {
			return 0, false, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return 0, false, err
	} // none: a version swamp did not finish (killed); moved as it is
	if err := os.MkdirAll(data, 0o755); err != nil {
		return 0, false, err
	}
	if err := os.Rename(src, filepath.Join(data, strconv.Itoa(to))); err != nil {
		return 0, false, fmt.Errorf("place %s/%d as %d: %w", m.Data, m.From, to, err)
	}
	if err := writeFile(filepath.Join(data, "latest"), []byte(strconv.Itoa(to))); err != nil {
		return 0, false, err
	}
	if vm.ID != "" {
		if err := renumberRecords(root, m.Data, vm, to); err != nil {
			return 0, false, err
		}
	}
	return to, false, nil
}

// sameVersion looks among the versions vs of the data name directory data
// for the version set aside at src (its metadata.yaml's id): found with the
// same files — metadata.yaml compared with its version set to the found
// one's, a file the found one lacks moved there — src is removed and the
// found number returned with true.
func sameVersion(data, src string, vs []int) (int, bool, error) {
	b, err := os.ReadFile(filepath.Join(src, "metadata.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	_, vm := renumberMetadata(b, 0)
	if vm.ID == "" {
		return 0, false, nil
	}
	for i := len(vs) - 1; i >= 0; i-- {
		dst := filepath.Join(data, strconv.Itoa(vs[i]))
		ob, err := os.ReadFile(filepath.Join(dst, "metadata.yaml"))
		if err != nil {
			continue
		}
		if _, ovm := renumberMetadata(ob, vs[i]); ovm.ID != vm.ID {
			continue
		}
		if nb, _ := renumberMetadata(b, vs[i]); !bytes.Equal(nb, ob) {
			return 0, false, nil // that id, other metadata: not the same version
		}
		var missing []string
		same := true
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !same {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			if rel == "metadata.yaml" {
				return nil
			}
			theirs, err := os.ReadFile(filepath.Join(dst, rel))
			if errors.Is(err, fs.ErrNotExist) {
				missing = append(missing, rel)
				return nil
			}
			if err != nil {
				return err
			}
			mine, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			same = bytes.Equal(mine, theirs)
			return nil
		})
		if err != nil || !same {
			return 0, false, err
		}
		for _, rel := range missing {
			// A file the ledger's copy lacks here (synced lazily, or not
			// there at all): this host's copy completes it.
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
				return 0, false, err
			}
			if err := os.Rename(filepath.Join(src, rel), filepath.Join(dst, rel)); err != nil {
				return 0, false, err
			}
		}
		return vs[i], true, os.RemoveAll(src)
	}
	return 0, false, nil
}

// versionMeta is what renumbering reads of a version's metadata.yaml: its id
// and, for a workflow step's data, the workflow run that made it.
type versionMeta struct {
	ID   string `yaml:"id"`
	Tags struct {
		WorkflowID    string `yaml:"workflowId"`
		WorkflowRunID string `yaml:"workflowRunId"`
	} `yaml:"tags"`
}

var metaVersion = regexp.MustCompile(`(?m)^version: \d+$`)

// renumberMetadata sets the top-level version of a version's metadata.yaml
// and returns it with what it says of the version.
func renumberMetadata(b []byte, v int) ([]byte, versionMeta) {
	b = metaVersion.ReplaceAll(b, []byte("version: "+strconv.Itoa(v)))
	var m versionMeta
	_ = yaml.Unmarshal(b, &m)
	return b, m
}

// renumberRecords sets the version of the data artifact meta.ID in the run
// records that name it: those of data's model (outputs/{type}/*/{modelId}-*.yaml)
// and, for a workflow step's data, its workflow run's
// (workflow-runs/{workflowId}/workflow-run-{runId}.yaml).
func renumberRecords(root, data string, meta versionMeta, v int) error {
	parts := strings.Split(data, "/") // data, type…, modelId, name
	typ, model := strings.Join(parts[1:len(parts)-2], "/"), parts[len(parts)-2]
	pattern := filepath.Join(root, "outputs", filepath.FromSlash(typ), "*", model+"-*.yaml")
	files, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	if wf, run := meta.Tags.WorkflowID, meta.Tags.WorkflowRunID; wf != "" && run != "" && !strings.ContainsAny(wf+run, `/\`) {
		files = append(files, filepath.Join(root, "workflow-runs", wf, "workflow-run-"+run+".yaml"))
	}
	id := meta.ID
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(id)) {
			continue
		}
		nb, ok, err := setArtifactVersion(b, id, v)
		if err != nil {
			return fmt.Errorf("run record %s: %w", f, err)
		}
		if ok {
			if err := writeFile(f, nb); err != nil {
				return err
			}
		}
	}
	return nil
}

// setArtifactVersion sets "version" in every mapping of the YAML document b
// whose "dataId" is id.
func setArtifactVersion(b []byte, id string, v int) ([]byte, bool, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, false, err
	}
	changed := false
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			var ver *yaml.Node
			match := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				switch n.Content[i].Value {
				case "dataId":
					match = n.Content[i+1].Value == id
				case "version":
					ver = n.Content[i+1]
				}
			}
			if match && ver != nil && ver.Value != strconv.Itoa(v) {
				ver.Value, changed = strconv.Itoa(v), true
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	if !changed {
		return b, false, nil
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, false, err
	}
	return out.Bytes(), true, enc.Close()
}

// CommitRenumbered commits like h.Commit, settling its conflicts by
// renumbering (host.CommitOptions.Settle, a mode of the write pipeline): when
// another host published first what this host's commit changes too (a
// *host.ConflictError: both wrote the same data version), the push syncs
// with SyncRenumbered, which moves this host's versions past the ledger's,
// and scans the whole cache again, within the push's policy
// (host.Policy.Settles).
func CommitRenumbered(ctx context.Context, h *host.Host, opt host.CommitOptions) (host.CommitResult, Renumbered, error) {
	var rn Renumbered
	settle := func(ctx context.Context) error {
		_, more, err := SyncRenumbered(ctx, h, host.SyncOptions{})
		rn.Moved = append(rn.Moved, more.Moved...)
		rn.Regenerated = append(rn.Regenerated, more.Regenerated...)
		rn.Duplicates = append(rn.Duplicates, more.Duplicates...)
		return err
	}
	opt.Settle = func(ctx context.Context, _ *host.ConflictError) error { return settle(ctx) }
	res, err := h.Commit(ctx, opt)
	if errors.Is(err, ledger.ErrRewound) {
		// A ledger that lost commits this cache applied (ErrRewound) is
		// healed by the sync, whose runs then go out with this commit.
		if err := settle(ctx); err != nil {
			return res, rn, err
		}
		opt.Changed = nil // the moved versions are new paths
		res, err = h.Commit(ctx, opt)
	}
	return res, rn, err
}
