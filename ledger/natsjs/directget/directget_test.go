package directget

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newStream makes a stream on "t.>" keeping history messages per subject.
func newStream(t *testing.T, history int64) (*nats.Conn, jetstream.JetStream, Stream) {
	t.Helper()
	_, nc := natsjstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{
		Name: "T", Subjects: []string{"t.>"}, AllowDirect: true, MaxMsgsPerSubject: history,
	}); err != nil {
		t.Fatal(err)
	}
	return nc, js, Stream{Conn: nc, Name: "T"}
}

func publish(t *testing.T, js jetstream.JetStream, subj, data string) uint64 {
	t.Helper()
	ack, err := js.Publish(testCtx(t), subj, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func summary(ms []Msg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%d %s %s", m.Seq, m.Subject, m.Data)
	}
	return out
}

func TestScanAndLastPerSubject(t *testing.T) {
	t.Parallel()
	_, js, s := newStream(t, -1)
	ctx := testCtx(t)
	publish(t, js, "t.a", "a1")
	publish(t, js, "t.b.x", "bx1")
	publish(t, js, "t.a", "a2")
	publish(t, js, "t.c", "c1")
	publish(t, js, "t.b.y", "by1")
	var got []Msg
	if err := s.Scan(ctx, "t.b.>", 1, func(m Msg) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"2 t.b.x bx1", "5 t.b.y by1"}; !slices.Equal(summary(got), want) {
		t.Fatalf("Scan(t.b.>) = %q, want %q", summary(got), want)
	}
	if got[0].Time.IsZero() {
		t.Error("Scan gave no time")
	}
	got = nil
	if err := s.Scan(ctx, "t.*", 3, func(m Msg) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"3 t.a a2", "4 t.c c1"}; !slices.Equal(summary(got), want) {
		t.Fatalf("Scan(t.*, 3) = %q, want %q", summary(got), want)
	}
	got = nil
	leader := s
	leader.Leader = true
	if err := leader.Scan(ctx, "t.b.>", 1, func(m Msg) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"2 t.b.x bx1", "5 t.b.y by1"}; !slices.Equal(summary(got), want) || got[0].Time.IsZero() {
		t.Fatalf("Scan(t.b.>) by the leader = %q, want %q", summary(got), want)
	}
	last, err := s.LastPerSubject(ctx, "t.>")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2 t.b.x bx1", "3 t.a a2", "4 t.c c1", "5 t.b.y by1"}; !slices.Equal(summary(last), want) {
		t.Fatalf("LastPerSubject(t.>) = %q, want %q", summary(last), want)
	}
	if last, err := s.LastPerSubject(ctx, "t.none"); err != nil || len(last) != 0 {
		t.Fatalf("LastPerSubject(t.none) = %q, %v", summary(last), err)
	}
	if err := (Stream{Conn: s.Conn, Name: "MISSING", Timeout: 200 * time.Millisecond}).Scan(ctx, ">", 1, func(Msg) error { return nil }); err == nil {
		t.Fatal("Scan of a missing stream: no error")
	}
}

// More subjects than one multi_last answer holds (the server answers 413):
// LastPerSubject lists them all by Scan; with history 1, and with more.
func TestLastPerSubjectMany(t *testing.T) {
	t.Parallel()
	nc, js, s := newStream(t, 2)
	ctx := testCtx(t)
	const n = 1500
	for i := range n {
		m := nats.NewMsg(fmt.Sprintf("t.k%d", i))
		m.Data = []byte("v1")
		if _, err := js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing timed out")
	}
	publish(t, js, "t.k7", "v2")
	last, err := s.LastPerSubject(ctx, "t.>")
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != n {
		t.Fatalf("LastPerSubject gave %d subjects, want %d", len(last), n)
	}
	if m := last[len(last)-1]; m.Subject != "t.k7" || string(m.Data) != "v2" {
		t.Fatalf("the last subject written again: %s %s", m.Subject, m.Data)
	}
	_ = nc
}

// A stored message whose own headers name another seq, subject or stream is
// listed where the stream holds it, as the leader states.
func TestForgedHeaders(t *testing.T) {
	t.Parallel()
	_, js, s := newStream(t, -1)
	ctx := testCtx(t)
	publish(t, js, "t.a", "a1")
	m := nats.NewMsg("t.b")
	m.Header.Set("Nats-Sequence", "1")
	m.Header.Set("Nats-Subject", "t.a")
	m.Header.Set("Nats-Stream", "OTHER")
	m.Data = []byte("b1")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	publish(t, js, "t.a", "a2")
	var got []Msg
	if err := s.Scan(ctx, "t.>", 1, func(m Msg) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 t.a a1", "2 t.b b1", "3 t.a a2"}; !slices.Equal(summary(got), want) {
		t.Fatalf("Scan = %q, want %q", summary(got), want)
	}
	last, err := s.LastPerSubject(ctx, "t.>")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2 t.b b1", "3 t.a a2"}; !slices.Equal(summary(last), want) {
		t.Fatalf("LastPerSubject = %q, want %q", summary(last), want)
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{"a.*.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
	} {
		if got := Matches(tc.filter, tc.subject); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v", tc.filter, tc.subject, got)
		}
	}
}
