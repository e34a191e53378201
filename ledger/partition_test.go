package ledger

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPartitionKeyGolden checks swamp's partition-key function and ours against
// testdata/partition_keys.tsv, built by hand from the reference (§1.5).
func TestPartitionKeyGolden(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/partition_keys.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) < 3 {
			t.Fatalf("bad golden line %q", line)
		}
		path, wantSwamp, wantOurs := cols[0], cols[1], cols[2]
		got, ok := SwampPartitionKey(path)
		if !ok {
			got = "<undefined>"
		}
		if got != wantSwamp {
			t.Errorf("SwampPartitionKey(%q) = %q, want %q", path, got, wantSwamp)
		}
		if got := PartitionKey(path); got != wantOurs {
			t.Errorf("PartitionKey(%q) = %q, want %q", path, got, wantOurs)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 12 {
		t.Fatalf("golden table has %d cases, want at least the reference's 12", n)
	}
	if _, ok := SwampPartitionKey(""); ok {
		t.Error(`SwampPartitionKey("") defined, want undefined`)
	}
}

func TestTypePartitionKeys(t *testing.T) {
	t.Parallel()
	keys := TypePartitionKeys("Command::Shell")
	for _, path := range []string{"data/command/shell/abc/result/latest", "definitions-evaluated/command/shell/consumer.yaml"} {
		if got := PartitionKey(path); !slices.Contains(keys, got) {
			t.Errorf("%s is in partition %q, not in TypePartitionKeys %q", path, got, keys)
		}
	}
}

func TestPartitionKeysForModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ, id string
		want    []string
	}{
		{"command/shell", "vpc", []string{"data--command--shell--vpc", "outputs--command--shell--vpc", "definitions-evaluated--command--shell--vpc"}},
		{"AWS::EC2::VPC", "abc-123", []string{"data--aws--ec2--vpc--abc-123", "outputs--aws--ec2--vpc--abc-123", "definitions-evaluated--aws--ec2--vpc--abc-123"}},
		{"my.type name", "m", []string{"data--my--type--name--m", "outputs--my--type--name--m", "definitions-evaluated--my--type--name--m"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, PartitionKeysForModel(tt.typ, tt.id)); diff != "" {
			t.Errorf("PartitionKeysForModel(%q, %q) (-want +got):\n%s", tt.typ, tt.id, diff)
		}
	}
	// The forward and reverse directions agree on versioned data files.
	if got, want := PartitionKey("data/aws/ec2/vpc/abc-123/state-main/1/raw"), PartitionKeysForModel("aws/ec2/vpc", "abc-123")[0]; got != want {
		t.Errorf("forward %q != reverse %q", got, want)
	}
}

func TestIsInternal(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		".datastore-index.json":      true,
		".push-queue.json":           true,
		".datastore.lock":            true,
		".datastore-sync-state.json": true,
		"_index/_meta.json":          true,
		"_index":                     true,
		"_control/x":                 true,
		"data/t/m/.lock":             true,
		"ns/.namespace.json":         true,
		"_catalog.db":                true,
		"x/_catalog.db-wal":          true,
		".syncledger/state.db":       true,
		".catalog-export.json":       false,
		"data/t/m/d/1/raw":           false,
		"data/_index/x":              false,
		"audit/.lockfile":            false,
	} {
		if got := IsInternal(path); got != want {
			t.Errorf("IsInternal(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestIsLazySkippable(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"data/t/m/d/1/raw":           true,
		"data/x/raw":                 true,
		"data/raw":                   false,
		"data/t/m/d/1/metadata.yaml": false,
		"outputs/t/m/d/1/raw":        false,
	} {
		if got := IsLazySkippable(path); got != want {
			t.Errorf("IsLazySkippable(%q) = %v, want %v", path, got, want)
		}
	}
}
