package swamp

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/syncledger/syncledger/ledger"
)

var vpcFiles = []string{
	"data/aws/ec2/vpc/abc-123/state-main/1/metadata.yaml",
	"data/aws/ec2/vpc/abc-123/state-main/1/raw",
	"data/aws/ec2/vpc/abc-123/state-main/latest",
}

func doctorConfig(t *testing.T, cache string) DoctorConfig {
	return DoctorConfig{Cache: cache, Remote: fileStore(t, fixture(t, "doctor/remote")), BackupDir: t.TempDir(),
		Now: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }}
}

func jsonMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDoctor3193(t *testing.T) {
	t.Parallel()
	cache := copyDir(t, fixture(t, "doctor/cache-3193"))
	before := hashTree(t, cache)
	cfg := doctorConfig(t, cache)

	rep, err := Doctor(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != Armed || rep.CommitSeq != 2 || *rep.Sidecar.CommitSeq != 2 || rep.Repair != nil {
		t.Fatalf("report: %+v", rep)
	}
	if diff := cmp.Diff(vpcFiles, rep.Missing); diff != "" {
		t.Fatalf("missing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, hashTree(t, cache)); diff != "" {
		t.Fatalf("doctor without --repair changed the cache:\n%s", diff)
	}

	cfg.Repair = true
	oldSidecar, _ := os.ReadFile(filepath.Join(cache, SidecarName))
	rep, err = Doctor(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Repair == nil || rep.Repair.Backup == "" {
		t.Fatalf("repair: %+v", rep.Repair)
	}
	if diff := cmp.Diff([]FieldChange{{Field: "commitSeq", Old: "2"}}, rep.Repair.Changes); diff != "" {
		t.Fatalf("changes (-want +got):\n%s", diff)
	}
	backup, err := os.ReadFile(rep.Repair.Backup)
	if err != nil || string(backup) != string(oldSidecar) {
		t.Fatalf("backup %s: %v (equal to the old sidecar: %v)", rep.Repair.Backup, err, string(backup) == string(oldSidecar))
	}
	if filepath.Dir(rep.Repair.Backup) != cfg.BackupDir {
		t.Fatalf("backup written to %s", rep.Repair.Backup)
	}
	newSidecar, _ := os.ReadFile(filepath.Join(cache, SidecarName))
	want := jsonMap(t, oldSidecar)
	delete(want, "commitSeq")
	if diff := cmp.Diff(want, jsonMap(t, newSidecar)); diff != "" {
		t.Fatalf("sidecar (-want +got):\n%s", diff)
	}
	// Only the sidecar changed: every data file (and swamp's local index) is
	// byte for byte the same, and nothing was added to the cache.
	after := hashTree(t, cache)
	delete(before, SidecarName)
	delete(after, SidecarName)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("repair touched the cache beyond the sidecar:\n%s", diff)
	}
	// The disarmed cache is merely behind now: swamp's slow path fetches the files.
	cfg.Repair = false
	rep, err = Doctor(testCtx(t), cfg)
	if err != nil || rep.State != Behind || rep.Sidecar.CommitSeq != nil {
		t.Fatalf("after repair: %+v, %v", rep, err)
	}
}

func TestDoctorHealthyAndBehind(t *testing.T) {
	t.Parallel()
	cache := copyDir(t, fixture(t, "doctor/cache-healthy"))
	cfg := doctorConfig(t, cache)
	cfg.Repair = true
	rep, err := Doctor(testCtx(t), cfg)
	if err != nil || rep.State != Healthy || rep.Findings() != 0 || rep.Files != 11 || rep.Repair != nil {
		t.Fatalf("healthy: %+v, %v", rep, err)
	}
	rep, err = Doctor(testCtx(t), doctorConfig(t, fixture(t, "doctor/cache-behind")))
	if err != nil || rep.State != Behind || len(rep.Missing) != 3 {
		t.Fatalf("behind: %+v, %v", rep, err)
	}
}

func TestDoctorDifferentAndLazy(t *testing.T) {
	t.Parallel()
	cache := copyDir(t, fixture(t, "doctor/cache-healthy"))
	write := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(cache, filepath.FromSlash(rel)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("audit/2026-01-01.jsonl", strings.Repeat("x", 30)) // same size, other content
	write("data/aws/ec2/vpc/abc-123/state-main/latest", "22\n")
	if err := os.Remove(filepath.Join(cache, filepath.FromSlash(vpcFiles[1]))); err != nil {
		t.Fatal(err)
	}
	rep, err := Doctor(testCtx(t), doctorConfig(t, cache))
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for _, d := range rep.Different {
		diffs = append(diffs, d.Path)
	}
	if rep.State != Armed || !slices.Equal(diffs, []string{"audit/2026-01-01.jsonl", vpcFiles[2]}) || len(rep.Missing) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	// Under lazy hydration an absent data/**/raw is not a finding.
	sc := filepath.Join(cache, SidecarName)
	b, _ := os.ReadFile(sc)
	if err := os.WriteFile(sc, []byte(strings.Replace(string(b), `"lazyPullActive": false`, `"lazyPullActive": true`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = Doctor(testCtx(t), doctorConfig(t, cache))
	if err != nil || len(rep.Missing) != 0 || rep.LazyAbsent != 1 {
		t.Fatalf("lazy: %+v, %v", rep, err)
	}
}

func TestDoctorNoSidecarAndErrors(t *testing.T) {
	t.Parallel()
	cache := copyDir(t, fixture(t, "doctor/cache-3193"))
	if err := os.Remove(filepath.Join(cache, SidecarName)); err != nil {
		t.Fatal(err)
	}
	cfg := doctorConfig(t, cache)
	cfg.Repair = true
	rep, err := Doctor(testCtx(t), cfg)
	if err != nil || rep.State != Behind || rep.Sidecar.Present || rep.Repair != nil {
		t.Fatalf("no sidecar: %+v, %v", rep, err)
	}
	empty := cfg
	empty.Remote = fileStore(t, t.TempDir())
	if _, err := Doctor(testCtx(t), empty); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("empty remote: %v", err)
	}
	cfg.Cache = filepath.Join(cache, "nope")
	if _, err := Doctor(testCtx(t), cfg); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing cache: %v", err)
	}
	// A backup that cannot be written leaves the sidecar as it was.
	cache = copyDir(t, fixture(t, "doctor/cache-3193"))
	old, _ := os.ReadFile(filepath.Join(cache, SidecarName))
	cfg = doctorConfig(t, cache)
	cfg.Repair, cfg.BackupDir = true, filepath.Join(cache, "no", "such", "dir")
	if _, err := Doctor(testCtx(t), cfg); err == nil {
		t.Fatal("repair with an unwritable backup dir succeeded")
	}
	if now, _ := os.ReadFile(filepath.Join(cache, SidecarName)); string(now) != string(old) {
		t.Fatal("sidecar changed although the backup failed")
	}
}

func TestSidecarDisarm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		changes        []FieldChange
	}{
		{
			name:    "s3 armed",
			in:      `{"version":2,"remoteIndexETag":"abc","localDirty":false,"commitSeq":7,"dirtyPaths":["a"]}`,
			want:    "{\n  \"version\": 2,\n  \"remoteIndexETag\": \"\",\n  \"localDirty\": false,\n  \"dirtyPaths\": [\n    \"a\"\n  ]\n}\n",
			changes: []FieldChange{{Field: "remoteIndexETag", Old: `"abc"`, New: `""`}, {Field: "commitSeq", Old: "7"}},
		},
		{
			name:    "gcs generation",
			in:      `{"version":1,"remoteIndexGeneration":"1700000000000001","lastVerifiedAt":"t","localDirty":false}`,
			want:    "{\n  \"version\": 1,\n  \"remoteIndexGeneration\": \"\",\n  \"lastVerifiedAt\": \"t\",\n  \"localDirty\": false\n}\n",
			changes: []FieldChange{{Field: "remoteIndexGeneration", Old: `"1700000000000001"`, New: `""`}},
		},
		{
			name: "nothing armed",
			in:   `{"version":2,"remoteIndexETag":"","localDirty":true}`,
			want: "{\n  \"version\": 2,\n  \"remoteIndexETag\": \"\",\n  \"localDirty\": true\n}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := ParseSidecar([]byte(tt.in))
			if err != nil || !sc.Valid {
				t.Fatalf("parse: %+v, %v", sc, err)
			}
			changes := sc.Disarm()
			if diff := cmp.Diff(tt.changes, changes); diff != "" {
				t.Fatalf("changes (-want +got):\n%s", diff)
			}
			if got := string(sc.Encode()); got != tt.want {
				t.Fatalf("encoded:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
	if sc, err := ParseSidecar([]byte(`{"version":3,"commitSeq":1}`)); err != nil || sc.Valid || sc.CommitSeq != nil {
		t.Fatalf("version 3: %+v, %v", sc, err)
	}
	if _, err := ParseSidecar([]byte(`[1]`)); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("array: %v", err)
	}
}
