package heartbeat_test

import (
	"context"
	"errors"
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
