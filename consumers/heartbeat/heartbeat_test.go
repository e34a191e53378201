package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syncledger/syncledger/consumers/consumertest"
	"github.com/syncledger/syncledger/consumers/heartbeat"
	"github.com/syncledger/syncledger/ledger"
)

func TestPutAndList(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "hb")
	ctx := consumertest.Ctx(t)
	s := heartbeat.NewStore(l.KV)
	before := time.Now().Add(-time.Second)
	for _, b := range []heartbeat.Beat{
		{Host: "web-2.example.com", HWM: 7, Head: 9, Version: "v1", Command: "sync"},
		{Host: "web-1", HWM: 3, Head: 3},
		{Host: "web-1", HWM: 5, Head: 9, Command: "watch"}, // replaces the one before
	} {
		if err := s.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Host != "web-1" || got[0].HWM != 5 || got[0].Command != "watch" ||
		got[1].Host != "web-2.example.com" || got[1].HWM != 7 || got[1].Version != "v1" {
		t.Fatalf("List = %+v", got)
	}
	for _, b := range got {
		if b.Seen.Before(before) || b.Time.Before(before) {
			t.Errorf("%s: seen %v, time %v: want now", b.Host, b.Seen, b.Time)
		}
	}
	if err := s.Forget(ctx, "web-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.List(ctx); len(got) != 1 {
		t.Errorf("after Forget: %+v", got)
	}
	if err := s.Put(ctx, heartbeat.Beat{}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Put without host = %v", err)
	}
}

func TestKeysAreDistinctAndValid(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, h := range []string{"a", "a.b", "a~2E", "a=2E", "host with space", "ü", "a/b"} {
		k := heartbeat.Key(h)
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=') {
				t.Errorf("Key(%q) = %q holds %q", h, k, c)
			}
		}
		if o, dup := seen[k]; dup {
			t.Errorf("Key(%q) = Key(%q) = %q", h, o, k)
		}
		seen[k] = h
	}
}

func TestReporter(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "hb")
	ctx := consumertest.Ctx(t)
	r, err := heartbeat.NewReporter(ctx, heartbeat.ReporterConfig{
		KV: l.KV, Beat: heartbeat.Beat{Host: "w", Command: "watch"}, Interval: time.Hour,
		MinGap: 10 * time.Millisecond, // not 200 ms: the test waits for the beat after the first
	})
	if err != nil {
		t.Fatal(err)
	}
	s := heartbeat.NewStore(l.KV)
	hwmOf := func() ledger.Seq {
		bs, err := s.List(ctx)
		if err != nil || len(bs) != 1 {
			return 0
		}
		return bs[0].HWM
	}
	consumertest.Wait(t, 5*time.Second, "first beat", func() bool {
		bs, _ := s.List(ctx)
		return len(bs) == 1
	})
	for i := 1; i <= 50; i++ {
		r.Update(ledger.Seq(i), ledger.Seq(i))
	}
	consumertest.Wait(t, 5*time.Second, "hwm 50", func() bool { return hwmOf() == 50 })
	r.Update(60, 61)
	r.Close()
	if got := hwmOf(); got != 60 {
		t.Errorf("after Close hwm = %d, want the last update 60", got)
	}
}

func TestReporterPosition(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "hb")
	ctx := consumertest.Ctx(t)
	var hwm atomic.Uint64
	hwm.Store(7)
	r, err := heartbeat.NewReporter(ctx, heartbeat.ReporterConfig{
		KV: l.KV, Beat: heartbeat.Beat{Host: "w"}, Interval: 20 * time.Millisecond, MinGap: 10 * time.Millisecond,
		Position: func(context.Context) (ledger.Seq, ledger.Seq, error) {
			return ledger.Seq(hwm.Load()), 9, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := heartbeat.NewStore(l.KV)
	at := func(want ledger.Seq) func() bool {
		return func() bool {
			bs, _ := s.List(ctx)
			return len(bs) == 1 && bs[0].HWM == want && bs[0].Head == max(9, want)
		}
	}
	consumertest.Wait(t, 5*time.Second, "hwm 7 from Position", at(7))
	hwm.Store(12) // an idle tick picks it up
	consumertest.Wait(t, 5*time.Second, "hwm 12 from Position", at(12))
}

// TestPutChecks: a beat without a host is refused.
func TestPutChecks(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "hbpub")
	if err := heartbeat.NewStore(l.KV).Put(consumertest.Ctx(t), heartbeat.Beat{}); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Put without host = %v, want ErrInvalid", err)
	}
}

// TestBadValuesAreRowsNotFailures is issue 38's point 6 from the attacker's
// side: any credential that may beat may put any value under any key of the
// bucket. Each bad value is one skipped, reported row; every good host is
// still listed; and Remove removes a bad row by its key, a host by its id,
// and says so only once the bucket no longer holds it.
func TestBadValuesAreRowsNotFailures(t *testing.T) {
	t.Parallel()
	l := consumertest.New(t, "hbbad")
	ctx := consumertest.Ctx(t)
	s := heartbeat.NewStore(l.KV)
	for _, b := range []heartbeat.Beat{{Host: "web-1", HWM: 4, Head: 5}, {Host: "web-2", HWM: 5, Head: 5}} {
		if err := s.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	planted := map[string]string{
		"zz-garbage":                 "not a heartbeat",
		"null":                       "null",
		"array":                      "[1,2]",
		"no-host":                    `{"hwm":3}`,
		"impostor":                   `{"host":"web-1","hwm":999999}`, // another host's beat, under a key not its own
		"negative":                   `{"host":"negative","hwm":-1}`,
		"bad-time":                   `{"host":"bad-time","time":"yesterday"}`,
		"huge":                       `{"host":"huge","version":"` + strings.Repeat("x", 5000) + `"}`,
		"a.b.c":                      "{",
		heartbeat.Key("web-3") + "x": `{"host":"web-3"}`,
	}
	for k, v := range planted {
		if _, err := l.KV.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Scan(ctx)
	if err != nil {
		t.Fatalf("Scan with bad values: %v", err)
	}
	var hosts, bad []string
	for _, b := range got.Beats {
		hosts = append(hosts, fmt.Sprintf("%s@%d", b.Host, b.HWM))
	}
	for _, b := range got.Bad {
		bad = append(bad, b.Key)
		if b.Err == "" || b.Seen.IsZero() {
			t.Errorf("bad row %+v: want the reason and when it was stored", b)
		}
	}
	if want := []string{"web-1@4", "web-2@5"}; !slices.Equal(hosts, want) {
		t.Errorf("Scan beats = %v, want %v", hosts, want)
	}
	wantBad := slices.Sorted(maps.Keys(planted))
	if !slices.Equal(bad, wantBad) {
		t.Errorf("Scan bad rows = %v, want %v", bad, wantBad)
	}
	if bs, err := s.List(ctx); err != nil || len(bs) != 2 {
		t.Errorf("List = %v, %v; want the 2 good hosts", bs, err)
	}

	// Remove: a bad row by its key, a host by its id; each gone afterwards.
	for _, name := range []string{"impostor", "web-2"} {
		r, err := s.Remove(ctx, name)
		if err != nil {
			t.Fatalf("Remove(%q): %v", name, err)
		}
		if _, err := l.KV.Get(ctx, r.Key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Remove(%q) removed %+v, yet Get(%s) = %v", name, r, r.Key, err)
		}
	}
	if _, err := s.Remove(ctx, "web-2"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Remove of a host gone already = %v, want ErrNotFound", err)
	}
	if _, err := s.Remove(ctx, "nobody"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Remove of an unknown name = %v, want ErrNotFound", err)
	}
	got, _ = s.Scan(ctx)
	if len(got.Beats) != 1 || got.Beats[0].Host != "web-1" || len(got.Bad) != len(planted)-1 {
		t.Errorf("after removing: %+v", got)
	}
}
