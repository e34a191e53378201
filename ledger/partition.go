package ledger

import (
	"strings"
	"unicode"
)

// RootPartition is the partition of files at the top of the datastore.
const RootPartition = "_root"

// SwampPartitionKey is swamp's partitionKeyFromPath (s3_cache_sync.ts, the later
// extension version; ../shared/reference/swamp-datastore.md §1.5), byte for byte:
//
//   - one segment → "_root"; empty → undefined;
//   - data/, outputs/, definitions-evaluated/: fewer than 4 segments → undefined;
//     6 or more → drop the last 3 segments; 4 or 5 → drop the last one; join with "--";
//   - workflow-runs/: fewer than 3 segments → undefined, else "workflow-runs--{seg[1]}";
//   - workflows-evaluated, auto-definitions, audit, telemetry, logs, files, config → the
//     subdir name;
//   - anything else → the subdir name (the later version's default case; 2026.08
//     returned undefined and dropped the entry).
//
// ok is false where swamp's function returns undefined.
func SwampPartitionKey(rel string) (key string, ok bool) {
	lit, body, ok := swampKeyParts(rel)
	if !ok {
		return "", false
	}
	if strings.IndexByte(body, '/') < 0 {
		return lit + body, true
	}
	return lit + strings.ReplaceAll(body, "/", "--"), true
}

// swampKeyParts computes swamp's key of rel as lit + body with every "/" of body
// turned into "--", without building it: the rules above on
// strings.Split(rel, "/"), without the slice (swampPartitionKeySplit, in the
// tests, is the direct transcription this must agree with). Every event read
// checks its entries' keys twice, so this is on the replay's hot path.
func swampKeyParts(rel string) (lit, body string, ok bool) {
	if rel == "" {
		return "", "", false
	}
	n := strings.Count(rel, "/") + 1
	if n == 1 {
		return RootPartition, "", true
	}
	first, rest, _ := strings.Cut(rel, "/")
	switch first {
	case "data", "outputs", "definitions-evaluated":
		switch {
		case n < 4:
			return "", "", false
		case n >= 6:
			return "", firstSegments(rel, n-3), true
		default:
			return "", firstSegments(rel, n-1), true
		}
	case "workflow-runs":
		if n < 3 {
			return "", "", false
		}
		second, _, _ := strings.Cut(rest, "/")
		return "workflow-runs--", second, true
	}
	return "", first, true // single-shard subdirs and the default case alike
}

// firstSegments returns the first k segments of rel (k below its segment count).
func firstSegments(rel string, k int) string {
	end := 0
	for range k {
		end += strings.IndexByte(rel[end:], '/') + 1
	}
	return rel[:end-1]
}

// InPartition reports whether PartitionKey(rel) == key, without building the key.
func InPartition(rel, key string) bool {
	lit, body, ok := swampKeyParts(rel)
	if !ok {
		body, _, _ = strings.Cut(rel, "/")
	}
	key, ok = strings.CutPrefix(key, lit)
	if !ok {
		return false
	}
	for i := 0; i < len(body); i++ {
		switch {
		case body[i] != '/':
			if key == "" || key[0] != body[i] {
				return false
			}
			key = key[1:]
		case strings.HasPrefix(key, "--"):
			key = key[2:]
		default:
			return false
		}
	}
	return key == ""
}

// PartitionKey returns the ledger partition of a datastore-relative path: swamp's
// key where swamp defines one, otherwise the path's first segment (for example
// "data" for the too-shallow "data/a/b"), so that no file is ever dropped. A
// syncledger partition therefore equals swamp's shard wherever swamp has one.
func PartitionKey(rel string) string {
	if k, ok := SwampPartitionKey(rel); ok {
		return k
	}
	first, _, _ := strings.Cut(rel, "/")
	return first
}

// NormalizeModelType is swamp's model-type normalisation (core model_type.ts):
// lower-cased, with "::", whitespace and "." turned into "/".
func NormalizeModelType(t string) string {
	t = strings.ToLower(t)
	t = strings.ReplaceAll(t, "::", "/")
	return strings.Map(func(r rune) rune {
		if r == '.' || unicode.IsSpace(r) {
			return '/'
		}
		return r
	}, t)
}

// PartitionKeysForModel is swamp's partitionKeysFromModel: the shard keys a
// model-scoped pull reads for a model, in swamp's order:
// data--{slug}--{id}, outputs--{slug}--{id}, definitions-evaluated--{slug}--{id},
// where slug is the normalized type with "/" replaced by "--".
//
// As the reference notes, these keys miss some of a model's files (its "latest"
// markers and its outputs land in other shards); scoped syncs inherit that, and it
// is safe: a scoped sync never moves the HWM, so a later full sync still reads them.
func PartitionKeysForModel(modelType, modelID string) []string {
	slug := strings.ReplaceAll(NormalizeModelType(modelType), "/", "--")
	return []string{
		"data--" + slug + "--" + modelID,
		"outputs--" + slug + "--" + modelID,
		"definitions-evaluated--" + slug + "--" + modelID,
	}
}

// TypePartitionKeys returns the type-wide partitions that hold files of every
// model of modelType: data--{slug} (each data name's "latest" marker,
// data/{type}/{id}/{name}/latest) and definitions-evaluated--{slug} (the
// evaluated definitions, definitions-evaluated/{type}/{name}.yaml). A run of
// one model reads other models' markers (through expressions such as
// model.vpc.resource…), and writes its own into these partitions, so a scoped
// sync before a run must read them too (issue 13). Outputs
// (outputs--{slug}--{method}) are per run and never read by a run.
func TypePartitionKeys(modelType string) []string {
	slug := strings.ReplaceAll(NormalizeModelType(modelType), "/", "--")
	return []string{"data--" + slug, "definitions-evaluated--" + slug}
}

// internalNames are swamp's files that never sync (isInternalCacheFile).
var internalNames = map[string]bool{
	".datastore-index.json":      true,
	".push-queue.json":           true,
	".datastore.lock":            true,
	".datastore-sync-state.json": true,
}

// IsInternal reports whether rel is one of swamp's internal cache files, which never
// sync (swamp-datastore.md §2.3), or syncledger's own state directory.
func IsInternal(rel string) bool {
	if internalNames[rel] {
		return true
	}
	first, _, _ := strings.Cut(rel, "/")
	if first == "_index" || first == "_control" || first == StateDir {
		return true
	}
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	return base == ".lock" || base == ".namespace.json" || base == "_catalog.db" || strings.HasPrefix(base, "_catalog.db-")
}

// IsLazySkippable is swamp's isLazySkippable: under lazy hydration, data/**/raw
// files with at least 3 segments are applied as metadata only.
func IsLazySkippable(rel string) bool {
	return strings.HasPrefix(rel, "data/") && strings.HasSuffix(rel, "/raw") && strings.Count(rel, "/") >= 2
}

// PartitionsUnder says which partition keys the files under directory dir
// (slash-separated, relative to the datastore; "" is its root) can have, by
// PartitionKey's rules: one of exact, or a key starting with prefix (when
// prefix is not empty); any is set when it can be every key (the root). A
// walk limited to some partitions skips the directories that can hold none
// of them. It may name keys no file there has, never leave one out.
func PartitionsUnder(dir string) (exact []string, prefix string, any bool) {
	if dir == "" {
		return nil, "", true
	}
	first, rest, _ := strings.Cut(dir, "/")
	m := strings.Count(dir, "/") + 1
	switch first {
	case "data", "outputs", "definitions-evaluated":
		// A file of fewer than 4 segments is in the first segment's
		// partition; any other's key joins its first k ≥ 3 segments
		// with "--": k segments of dir, or all of dir and more.
		if m <= 2 {
			exact = append(exact, first)
		}
		for k := 3; k < m; k++ {
			exact = append(exact, strings.ReplaceAll(firstSegments(dir, k), "/", "--"))
		}
		joined := strings.ReplaceAll(dir, "/", "--")
		if m >= 3 {
			exact = append(exact, joined)
		}
		return exact, joined + "--", false
	case "workflow-runs":
		if m == 1 {
			return []string{first}, first + "--", false // workflow-runs/x, and deeper
		}
		second, _, _ := strings.Cut(rest, "/")
		return []string{first + "--" + second}, "", false
	}
	return []string{first}, "", false
}
