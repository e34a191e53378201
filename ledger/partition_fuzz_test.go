package ledger

import (
	"bufio"
	"flag"
	"os"
	"strings"
	"testing"
)

// FuzzPartitionKey checks the partition functions on arbitrary paths: they never
// panic, PartitionKey agrees with swamp's key wherever swamp defines one, every
// valid path gets a key that is a single, reversible subject token built from the
// path's own leading segments, and the swamp rules' invariances hold (the last
// segments of a deep data path never change its key). The seed corpus is the
// golden table plus the edge cases of each rule.
func FuzzPartitionKey(f *testing.F) {
	if fh, err := os.Open("testdata/partition_keys.tsv"); err == nil {
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
				path, _, _ := strings.Cut(line, "\t")
				f.Add(path, "aws/ec2/vpc", "abc-123")
			}
		}
		fh.Close()
	}
	for _, s := range []string{
		"", "/", "a", "a/", "/a", "data", "data/", "data//x/y/z", "data/a/b/c", "data/a/b/c/d/e/f/g/h",
		"workflow-runs/", "workflow-runs//x", "outputs/a/b/c/d", "definitions-evaluated/a/b",
		"audit", "_root", "_index/x.json", ".syncledger/state.db", "data/a.b/c*d/e>f/g h/1/raw",
		"data/é/ü/✓/x/1/raw", "data/\x00/a/b/c", "data/~7E/a/b/c", "x/../y", "data/t/m/.lock",
	} {
		f.Add(s, "command/shell", "vpc")
	}
	f.Add("data/a/b/c/1/raw", "AWS::EC2::VPC", "m-1")
	f.Add("data/a/b/c/1/raw", "my.type name", "id")
	f.Add("data/a/b/c/1/raw", "", "")
	f.Add("data/a/b/c/1/raw", "a//b", "x/y")

	f.Fuzz(func(t *testing.T, path, modelType, modelID string) {
		key := PartitionKey(path)
		swamp, ok := SwampPartitionKey(path)
		if ok && swamp != key {
			t.Fatalf("PartitionKey(%q) = %q, swamp's key is %q", path, key, swamp)
		}
		if ref, refOK := swampPartitionKeySplit(path); ref != swamp || refOK != ok {
			t.Fatalf("SwampPartitionKey(%q) = %q, %v; the split rules give %q, %v", path, swamp, ok, ref, refOK)
		}
		if !InPartition(path, key) {
			t.Fatalf("InPartition(%q, %q) is false; PartitionKey gives that key", path, key)
		}
		for _, other := range []string{modelType, modelID, key + "-", key + "--", strings.TrimSuffix(key, "-"), "_root", ""} {
			if InPartition(path, other) != (PartitionKey(path) == other) {
				t.Fatalf("InPartition(%q, %q) = %v, PartitionKey gives %q", path, other, InPartition(path, other), key)
			}
		}
		if isUUID(modelID) != isUUIDRegexp(modelID) {
			t.Fatalf("isUUID(%q) = %v, ValidateUUID disagrees", modelID, isUUID(modelID))
		}
		_ = IsInternal(path)
		_ = IsLazySkippable(path)
		tok := EscapeToken(key)
		checkSubjectToken(t, tok)
		if back, err := UnescapeToken(tok); err != nil || back != key {
			t.Fatalf("key %q of %q: token %q unescapes to %q, %v", key, path, tok, back, err)
		}
		if ValidatePath(path) == nil {
			checkValidPathKey(t, path, key)
		}
		checkModelKeys(t, modelType, modelID)
	})
}

// checkSubjectToken fails unless tok is one NATS subject token of the safe bytes
// and "~" escapes.
func checkSubjectToken(t *testing.T, tok string) {
	t.Helper()
	if tok == "" {
		t.Fatal("empty subject token")
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !tokenSafe(c) && c != '~' {
			t.Fatalf("token %q has byte %q at %d", tok, c, i)
		}
	}
}

// checkValidPathKey checks the key of a valid path.
func checkValidPathKey(t *testing.T, path, key string) {
	t.Helper()
	segs := strings.Split(path, "/")
	if key == "" {
		t.Fatalf("valid path %q has an empty key", path)
	}
	if strings.Contains(key, "/") {
		t.Fatalf("key %q of %q contains a slash", key, path)
	}
	if len(segs) == 1 {
		if key != RootPartition {
			t.Fatalf("one-segment path %q: key %q, want %q", path, key, RootPartition)
		}
		return
	}
	// The key is the path's first segment, or its leading segments joined by "--"
	// (workflow-runs: the first two), never anything the path does not start with.
	switch {
	case key == segs[0]:
	case segs[0] == "workflow-runs" && key == "workflow-runs--"+segs[1]:
	default:
		joined := false
		for n := 2; n < len(segs) && !joined; n++ {
			joined = strings.Join(segs[:n], "--") == key
		}
		if !joined {
			t.Fatalf("key %q of %q is neither its first segment nor a join of its leading directories", key, path)
		}
	}
	// Deep data/outputs/definitions paths: the last three segments (name,
	// version, file) never change the key.
	switch segs[0] {
	case "data", "outputs", "definitions-evaluated":
		if len(segs) >= 6 {
			other := strings.Join(append(segs[:len(segs)-3:len(segs)-3], "n", "9", "f"), "/")
			if k := PartitionKey(other); k != key {
				t.Fatalf("%q → %q but %q → %q: the last three segments changed the key", path, key, other, k)
			}
		}
	}
	// Files of one directory share a partition, except at the top level and in
	// the 4-5 segment data rule, where the directory is the key itself.
	if len(segs) >= 6 || segs[0] == "workflow-runs" && len(segs) >= 3 {
		sib := strings.Join(append(segs[:len(segs)-1:len(segs)-1], "sibling"), "/")
		if k := PartitionKey(sib); k != key {
			t.Fatalf("%q → %q but its sibling %q → %q", path, key, sib, k)
		}
	}
}

// checkModelKeys checks that a model's data files, as swamp lays them out, land
// in the first key PartitionKeysForModel names (the forward and reverse
// directions agree), whenever the model type and id make a valid path.
func checkModelKeys(t *testing.T, modelType, modelID string) {
	t.Helper()
	keys := PartitionKeysForModel(modelType, modelID)
	if len(keys) != 3 {
		t.Fatalf("PartitionKeysForModel(%q, %q) = %q, want 3 keys", modelType, modelID, keys)
	}
	norm := NormalizeModelType(modelType)
	if strings.Contains(modelID, "/") || modelID == "" || norm == "" {
		return
	}
	path := "data/" + norm + "/" + modelID + "/state/1/raw"
	if ValidatePath(path) != nil {
		return
	}
	if got := PartitionKey(path); got != keys[0] {
		t.Fatalf("model %q/%q: data file %q → %q, PartitionKeysForModel says %q", modelType, modelID, path, got, keys[0])
	}
}

// swampPartitionKeySplit is SwampPartitionKey transcribed directly from swamp's
// rules on the split path: the reference the allocation-free version must
// match (FuzzPartitionKey, TestSwampPartitionKeyMatchesSplit).
func swampPartitionKeySplit(rel string) (string, bool) {
	if rel == "" {
		return "", false
	}
	segs := strings.Split(rel, "/")
	if len(segs) == 1 {
		return RootPartition, true
	}
	switch segs[0] {
	case "data", "outputs", "definitions-evaluated":
		switch n := len(segs); {
		case n < 4:
			return "", false
		case n >= 6:
			return strings.Join(segs[:n-3], "--"), true
		default:
			return strings.Join(segs[:n-1], "--"), true
		}
	case "workflow-runs":
		if len(segs) < 3 {
			return "", false
		}
		return "workflow-runs--" + segs[1], true
	}
	return segs[0], true
}

// isUUIDRegexp is isUUID's specification: ValidateUUID's regular expression.
func isUUIDRegexp(s string) bool { return ValidateUUID(s) == nil }

// partitionDepth is how many segments TestSwampPartitionKeyMatchesSplit's
// paths have at most: every path of up to 6 segments by default (0.6M paths,
// 0.3 s); .ci/run adds 7 (5.4M, 3 s).
var partitionDepth = flag.Int("partition.depth", 6, "most segments of the paths TestSwampPartitionKeyMatchesSplit enumerates (CI: 7)")

func TestSwampPartitionKeyMatchesSplit(t *testing.T) {
	t.Parallel()
	segs := []string{"", "data", "outputs", "definitions-evaluated", "workflow-runs", "audit", "a", "x-y", "é"}
	var walk func(prefix string, depth int)
	n := 0
	walk = func(prefix string, depth int) {
		for _, s := range segs {
			p := s
			if depth > 0 {
				p = prefix + "/" + s
			}
			k1, ok1 := SwampPartitionKey(p)
			k2, ok2 := swampPartitionKeySplit(p)
			if k1 != k2 || ok1 != ok2 {
				t.Fatalf("SwampPartitionKey(%q) = %q, %v; the split rules give %q, %v", p, k1, ok1, k2, ok2)
			}
			key := PartitionKey(p)
			for _, other := range []string{key, key + "-", key + "--", "data--a", "data", "_root", "workflow-runs--", ""} {
				if InPartition(p, other) != (key == other) {
					t.Fatalf("InPartition(%q, %q) = %v, PartitionKey gives %q", p, other, !(key == other), key)
				}
			}
			n++
			if depth < *partitionDepth-1 {
				walk(p, depth+1)
			}
		}
	}
	walk("", 0)
	for _, s := range []string{"", "0", "6f1c2a7e-1b2d-4c3e-8f40-5a6b7c8d9e0f", "6f1c2a7e-1b2d-4c3e-8f40-5a6b7c8d9e0F",
		"6f1c2a7e-1b2d-4c3e-8f40-5a6b7c8d9e0", "6f1c2a7e+1b2d-4c3e-8f40-5a6b7c8d9e0f", "6f1c2a7e-1b2d-4c3e-8f40-5a6b7c8d9e0g",
		"6f1c2a7e1-b2d-4c3e-8f40-5a6b7c8d9e0f", "------------------------------------", "6f1c2a7e-1b2d-4c3e-8f40-5a6b7c8d9e-f"} {
		if isUUID(s) != isUUIDRegexp(s) {
			t.Fatalf("isUUID(%q) = %v, ValidateUUID says %v", s, isUUID(s), isUUIDRegexp(s))
		}
	}
	t.Logf("%d paths of up to %d segments agree", n, *partitionDepth)
}
