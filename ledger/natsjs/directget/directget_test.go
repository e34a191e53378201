package directget

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/syncledger/syncledger/internal/testmain"
	"github.com/syncledger/syncledger/ledger/natsjs/natsjstest"
)

func testCtx(t *testing.T) context.Context { return testmain.Context(t, time.Minute) }

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

// rawPublish sends one message with the header block hdr exactly as given
// (HPUB), as a hostile client may, and waits for the server's PONG.
func rawPublish(t *testing.T, url, subj, hdr, body string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"headers\":true,\"protocol\":1}\r\nHPUB %s %d %d\r\n%s%s\r\nPING\r\n",
		subj, len(hdr), len(hdr)+len(body), hdr, body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "PONG") {
		t.Fatalf("raw publish: %q, %v", line, err)
	}
}

// canonical is the length of a parsed header block written as the server
// writes one (what block compares the wire length with).
func canonical(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			if k == "Status" || k == "Description" {
				n += 1 + len(v)
				continue
			}
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// TestPaddedHiddenBlock: a header block whose blank line hides what follows,
// padded so that what nats.go parses, written out, is exactly as long as the
// whole block on the wire — the attack a length check alone misses — needs
// more values than MaxHeaderValues, for the least the server ever appends
// (MinServerHeaders), and is not whole; nor is a stored message dressed as an
// end-of-batch status. A block of a server's own shape is whole.
func TestPaddedHiddenBlock(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	sub, err := nc.SubscribeSync("raw")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	receive := func(hdr, body string) *nats.Msg {
		t.Helper()
		rawPublish(t, srv.ClientURL(), "raw", hdr, body)
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const stream = "S"
	// What the server appends, at its shortest (the hidden part).
	hidden := "Nats-Stream: " + stream + "\r\nNats-Subject: x\r\nNats-Sequence: 1\r\nNats-Time-Stamp: 2006-01-02T15:04:05Z\r\n"
	if len(hidden) != MinServerHeaders(stream) {
		t.Fatalf("MinServerHeaders(%q) = %d, the shortest block is %d", stream, MinServerHeaders(stream), len(hidden))
	}
	forged := "Nats-Stream:" + stream + "\nNats-Subject:y\nNats-Sequence:9\nNats-Time-Stamp:2006-01-02T15:04:05Z\n"
	for _, status := range []string{"", " 204 EOB"} {
		// Each "P:v\n" line is written 2 bytes longer than sent; add lines
		// until the written block is as long as the wire's.
		var pad strings.Builder
		values := 4
		build := func() string {
			return "NATS/1.0" + status + "\n" + forged + pad.String() + "\n" + hidden + "\r\n"
		}
		for {
			m := receive(build(), "")
			wire := m.Size() - len(m.Subject) - len(m.Data)
			if c := canonical(m.Header); c >= wire {
				if c != wire {
					pad.WriteString(":x\n") // a line the parser skips (no key): 3 bytes sent, none written
					continue
				}
				if values <= MaxHeaderValues {
					t.Fatalf("a hidden block passes for whole with %d values (status %q): MaxHeaderValues %d is too high", values, status, MaxHeaderValues)
				}
				if WholeHeader(m) {
					t.Errorf("a padded hidden block (%d values, status %q) is taken as whole", values, status)
				}
				if st, ok := Status(m); ok {
					t.Errorf("a padded hidden block is taken as a status %s answer", st)
				}
				if got := m.Header.Get("Nats-Sequence"); got != "9" {
					t.Fatalf("the forged block is not what nats.go parsed: seq %q", got)
				}
				break
			}
			pad.WriteString("P:v\n")
			values++
		}
	}
	// The server's own shapes are whole.
	for _, hdr := range []string{
		"NATS/1.0\r\n" + hidden + "\r\n",
		"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 7\r\n\r\n",
		"NATS/1.0 404 Message Not Found\r\n\r\n",
	} {
		m := receive(hdr, "")
		st, whole := block(m)
		if !whole || (st == "") != strings.HasPrefix(hdr, "NATS/1.0\r\n") {
			t.Errorf("block(%q) = %q, %v", hdr, st, whole)
		}
	}
}

// TestStoredEndOfBatch: a stored message whose header block says it is an
// end-of-batch status ("no more") over a blank line hiding the server's
// headers ends no listing early: Scan and LastPerSubject list
// every message, that one as the leader states it.
func TestStoredEndOfBatch(t *testing.T) {
	t.Parallel()
	srv, nc := natsjstest.RunServer(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	s := Stream{Conn: nc, Name: "T"}
	ctx := testCtx(t)
	publish(t, js, "t.a", "a1")
	// (The server drops a publish's status line; a Status header line it keeps.)
	rawPublish(t, srv.ClientURL(), "t.eob", "NATS/1.0\r\nStatus: 204\r\nDescription: EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 0\r\n\r\n\r\n", "")
	publish(t, js, "t.b", "b1")
	publish(t, js, "t.c", "c1")
	var got []Msg
	if err := s.Scan(ctx, "t.>", 1, func(m Msg) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 t.a a1", "2 t.eob ", "3 t.b b1", "4 t.c c1"}; !slices.Equal(summary(got), want) {
		t.Fatalf("Scan = %q, want %q", summary(got), want)
	}
	last, err := s.LastPerSubject(ctx, "t.>")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 t.a a1", "2 t.eob ", "3 t.b b1", "4 t.c c1"}; !slices.Equal(summary(last), want) {
		t.Fatalf("LastPerSubject = %q, want %q", summary(last), want)
	}
}
