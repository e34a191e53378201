package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/natsblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/natsauth"
)

// The hostile-client sweep's catalogue: the JetStream subjects nats-server
// declares, filled in with the ledger's resources, and the hostile bodies and
// headers each may carry (TestHostileSweep).

// serverSubjects returns the subject patterns nats-server declares as string
// constants beginning "$JS" (its JetStream API, "$JS.API.…", and the rest:
// acknowledgements, flow control, snapshots, advisories, the cluster's
// "$JSC.…"), a format's "%s" as "*", read from the source of the nats-server
// module this build links (go list -m), so that a server upgrade's new API
// is swept without anyone listing it.
var serverSubjects = sync.OnceValues(func() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "github.com/nats-io/nats-server/v2").Output()
	if err != nil {
		return nil, err
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	fset := token.NewFileSet()
	entries, err := os.ReadDir(filepath.Join(dir, "server"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, "server", e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				for _, v := range s.(*ast.ValueSpec).Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					subj, err := strconv.Unquote(lit.Value)
					if err != nil || !strings.HasPrefix(subj, "$JS") || strings.ContainsAny(subj, " {}") {
						continue
					}
					subj = strings.TrimSuffix(strings.ReplaceAll(subj, "%s", "*"), ".")
					seen[subj] = true
				}
			}
		}
	}
	subjects := slices.Sorted(func(yield func(string) bool) {
		for s := range seen {
			if !yield(s) {
				return
			}
		}
	})
	if len(subjects) < 50 {
		return nil, &catalogError{version, len(subjects)}
	}
	return subjects, nil
})

type catalogError struct {
	version string
	n       int
}

func (e *catalogError) Error() string {
	return "nats-server " + e.version + " declares only " + strconv.Itoa(e.n) + " $JS subjects: the source was not read"
}

// sweepNames are what the sweep fills a pattern's wildcards with: the
// ledger's streams (and one of a namespace not yet made, and another's),
// its consumers (two the admin made and one that does not exist), and
// subjects.
var (
	sweepStreams = []string{
		ledger.StreamName(rigLedger), natsjs.KVStream(natsjs.HeartbeatBucket(rigLedger)),
		natsjs.KVStream(natsjs.SwampBucket(rigLedger)), natsjs.DeadLetterStream(rigLedger),
		natsblob.StreamName(rigBucket), natsjs.KVStream(natsjs.SwampBucket(rigLedger + "_ns")), "OTHER",
	}
	sweepConsumers = []string{"audit", "hook", "sweep"}
)

// fill returns the concrete subjects of pattern p: its first "*" each
// stream, its later ones each consumer, a last ">" a consumer and a filter
// subject (or, after DIRECT.GET.<stream>, a subject of the ledger). short
// takes every stream and the first of the rest.
func fill(p string, short bool) []string {
	toks := strings.Split(p, ".")
	out := []string{""}
	wild := 0
	for i, tok := range toks {
		var opts []string
		switch {
		case tok == "*" && wild == 0:
			opts = sweepStreams
			wild++
		case tok == "*":
			opts = sweepConsumers
			wild++
		case tok == ">" && i == len(toks)-1 && strings.HasPrefix(p, "$JS.API.DIRECT.GET."):
			opts = []string{ledger.SubjectPrefix(rigLedger) + "audit", "$KV." + natsjs.SwampBucket(rigLedger) + ".control", ">"}
		case tok == ">" && i == len(toks)-1:
			opts = []string{"audit", "audit." + ledger.SubjectPrefix(rigLedger) + "x", "1.2.3.4.5.6"}
		default:
			opts = []string{tok}
		}
		if short && !slices.Equal(opts, sweepStreams) {
			opts = opts[:1]
		}
		var next []string
		for _, prefix := range out {
			for _, o := range opts {
				if prefix == "" && i == 0 {
					next = append(next, o)
				} else {
					next = append(next, prefix+"."+o)
				}
			}
		}
		out = next
	}
	return out
}

// apiBodies are the bodies of a request to subject: for a create or an
// update, every configuration that would let its sender decide what others'
// writes become; for the rest, what changes or exhausts something. short
// takes the first.
func apiBodies(subject string, short bool) [][]byte {
	toks := strings.Split(subject, ".")
	var kind, stream string
	if len(toks) >= 4 && toks[0] == "$JS" && toks[1] == "API" {
		kind = toks[2] + "." + toks[3]
		switch {
		case kind == "CONSUMER.CREATE" && len(toks) > 4:
			stream = toks[4]
		case kind == "CONSUMER.DURABLE" && len(toks) > 5:
			stream = toks[5]
		}
	}
	var bodies []any
	switch {
	case kind == "STREAM.CREATE" || kind == "STREAM.UPDATE":
		for _, what := range slices.Sorted(mapKeys(hostileStreamConfigs(streamOf(subject)))) {
			bodies = append(bodies, hostileStreamConfigs(streamOf(subject))[what])
		}
		name := streamOf(subject)
		bodies = append(bodies,
			map[string]any{"name": name, "subjects": []string{">"}},
			map[string]any{"name": name, "subjects": []string{"$KV.>", "$O.>", "syncledger.>"}},
			map[string]any{"name": name, "duplicate_window": int64(time.Hour), "deny_purge": false},
			map[string]any{"name": name, "discard": "new", "discard_new_per_subject": true, "max_msgs_per_subject": 1},
			map[string]any{"name": name, "no_ack": true},
			map[string]any{"name": name, "first_seq": 1 << 40},
			map[string]any{"name": name, "compression": "s2", "metadata": map[string]string{"syncledger.format": "9"}},
			map[string]any{"name": name, "subject_delete_marker_ttl": int64(time.Second), "allow_msg_ttl": true},
			map[string]any{"name": name, "consumer_limits": map[string]any{"inactive_threshold": int64(time.Second)}},
		)
	case kind == "CONSUMER.CREATE" || kind == "CONSUMER.DURABLE":
		for _, cfg := range []map[string]any{
			{"ack_policy": "all", "filter_subject": "syncledger.nothing.p.x"},
			{"ack_policy": "explicit", "inactive_threshold": int64(time.Second)},
			{"ack_policy": "none", "deliver_policy": "new"},
			{"ack_policy": "explicit", "deliver_policy": "by_start_sequence", "opt_start_seq": 1 << 40},
			{"ack_policy": "explicit", "max_ack_pending": 1, "max_deliver": 1},
			{"ack_policy": "explicit", "headers_only": true},
			{"ack_policy": "explicit", "deliver_subject": "leak"},
			{"ack_policy": "explicit", "priority_groups": []string{"g"}, "priority_policy": "pinned_client"},
			{"ack_policy": "explicit", "max_waiting": 1, "max_batch": 1, "max_expires": int64(time.Millisecond)},
		} {
			for _, c := range sweepConsumers {
				cc := map[string]any{"durable_name": c}
				for k, v := range cfg {
					cc[k] = v
				}
				bodies = append(bodies, map[string]any{"stream_name": stream, "config": cc, "action": ""}, map[string]any{"stream_name": stream, "config": cc, "action": "update"})
				if short {
					break
				}
			}
		}
	case kind == "STREAM.PURGE":
		bodies = append(bodies, map[string]any{}, map[string]any{"filter": ">"}, map[string]any{"keep": 1}, map[string]any{"seq": 1 << 40})
	case kind == "STREAM.MSG" && len(toks) > 4 && toks[4] == "DELETE":
		bodies = append(bodies, map[string]any{"seq": 1}, map[string]any{"seq": 1, "no_erase": true})
	case kind == "STREAM.MSG" || kind == "DIRECT.GET":
		bodies = append(bodies, map[string]any{"seq": 1}, map[string]any{"last_by_subj": ">"},
			map[string]any{"seq": 1, "batch": 100000, "max_bytes": 1 << 30},
			map[string]any{"multi_last": []string{">"}, "batch": 100000},
			map[string]any{"seq": 1, "next_by_subj": ">", "batch": 2},
			map[string]any{"start_time": time.Unix(0, 0)}, map[string]any{"up_to_time": time.Unix(1, 0), "multi_last": []string{">"}})
	case kind == "STREAM.INFO":
		bodies = append(bodies, map[string]any{}, map[string]any{"subjects_filter": ">", "deleted_details": true, "offset": 1 << 30})
	case kind == "CONSUMER.MSG":
		bodies = append(bodies, map[string]any{"batch": 1, "expires": int64(100 * time.Millisecond)},
			map[string]any{"batch": 1000000, "no_wait": true}, map[string]any{"batch": 1, "max_bytes": 1, "no_wait": true},
			map[string]any{"batch": 1, "group": "g", "min_pending": 1, "id": "x", "no_wait": true},
			map[string]any{"batch": 1, "expires": int64(100 * time.Millisecond), "idle_heartbeat": int64(10 * time.Millisecond)})
	case kind == "CONSUMER.RESET":
		bodies = append(bodies, map[string]any{"seq": 1}, map[string]any{}, map[string]any{"seq": 1 << 40})
	case kind == "CONSUMER.PAUSE":
		bodies = append(bodies, map[string]any{"pause_until": time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)})
	case kind == "CONSUMER.LIST" || kind == "CONSUMER.NAMES" || kind == "STREAM.LIST" || kind == "STREAM.NAMES":
		bodies = append(bodies, map[string]any{"offset": 0}, map[string]any{"offset": 1 << 30, "subject": ">"})
	case kind == "STREAM.SNAPSHOT":
		bodies = append(bodies, map[string]any{"deliver_subject": "_INBOX.sweep", "chunk_size": 1024})
	case kind == "STREAM.RESTORE":
		bodies = append(bodies, map[string]any{"config": map[string]any{"name": streamOf(subject), "subjects": []string{">"}}})
	}
	out := [][]byte{nil}
	for _, b := range bodies {
		j, _ := json.Marshal(b)
		out = append(out, j)
	}
	if len(out) > 1 {
		out = out[1:] // the hostile ones
	}
	if short {
		out = out[:1]
	}
	return out
}

// streamOf is the last token of an API subject about a stream.
func streamOf(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// permitted reports whether perms let a publish to subject through.
func permitted(p *natsauth.Permissions, subject string) bool { return p.Publish.Allows(subject) }
