package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/natsjs"
)

// The raw baselines: the JetStream (and S3) requests an operation needs, made
// directly with nats.go (orbit.go for atomic batches) and the SDK, with no
// validation, encoding, state or cache work. A scenario's ratio compares it with
// its baseline measured in the same run, interleaved with it.

const jsAPI = "$JS.API."

// rawStreamInfo is one stream info request ($JS.API.STREAM.INFO), its answer's
// state parsed: what a no-op full sync needs to learn the log's last seq.
func rawStreamInfo(ctx context.Context, nc *nats.Conn, stream string) (uint64, error) {
	msg, err := nc.RequestWithContext(ctx, jsAPI+"STREAM.INFO."+stream, nil)
	if err != nil {
		return 0, err
	}
	var r struct {
		Error *jetstream.APIError `json:"error"`
		State struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return 0, err
	}
	if r.Error != nil {
		return 0, r.Error
	}
	return r.State.LastSeq, nil
}

// rawDirectLast is one direct get of a subject's last message (404: none).
func rawDirectLast(ctx context.Context, nc *nats.Conn, stream, subj string) error {
	body, _ := json.Marshal(map[string]string{"last_by_subj": subj})
	msg, err := nc.RequestWithContext(ctx, jsAPI+"DIRECT.GET."+stream, body)
	if err != nil {
		return err
	}
	if st := msg.Header.Get("Status"); st != "" && st != "404" {
		return fmt.Errorf("direct get: status %s", st)
	}
	return nil
}

// rawDirectLasts gets the last message of each partition's subject, the
// requests in flight at once (as a scoped sync sends them).
func rawDirectLasts(ctx context.Context, nc *nats.Conn, lg *natsjs.Log, partitions []string) error {
	return parallel(len(partitions), len(partitions), func(i int) error {
		return rawDirectLast(ctx, nc, lg.Stream(), ledger.Subject(lg.Name(), partitions[i]))
	})
}

// rawDirectBatch reads up to 256 messages of subj from seq 1 with one batched
// direct get, and returns how many it got.
func rawDirectBatch(ctx context.Context, nc *nats.Conn, stream, subj string) (int, error) {
	body, _ := json.Marshal(map[string]any{"seq": 1, "next_by_subj": subj, "batch": 256, "max_bytes": 8 << 20})
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(jsAPI+"DIRECT.GET."+stream, inbox, body); err != nil {
		return 0, err
	}
	n := 0
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, err
		}
		if st := msg.Header.Get("Status"); st != "" && len(msg.Data) == 0 {
			if st == "204" || st == "404" {
				return n, nil
			}
			return n, fmt.Errorf("direct get: status %s", st)
		}
		n++
	}
}

// casPublisher publishes to one subject with the expected last subject seq of
// its previous publish: the plain JetStream compare-and-append.
type casPublisher struct {
	js     jetstream.JetStream
	stream string
	subj   string
	data   []byte
	prev   uint64
	n      int
}

func (p *casPublisher) publish(ctx context.Context) error {
	p.n++
	ack, err := p.js.Publish(ctx, p.subj, p.data,
		jetstream.WithMsgID(p.subj+"/"+strconv.Itoa(p.n)),
		jetstream.WithExpectStream(p.stream),
		jetstream.WithExpectLastSequencePerSubject(p.prev))
	if err != nil {
		return err
	}
	p.prev = ack.Sequence
	return nil
}

// batchPublisher publishes atomic batches of one message per subject, each with
// its subject's expected last seq, with the flow control the Log uses for a
// batch of that size (ack of the first message and every 64th beyond 8).
type batchPublisher struct {
	js     jetstream.JetStream
	stream string
	subjs  []string
	data   []byte
	prev   []uint64
	n      int
}

func (p *batchPublisher) publish(ctx context.Context) error {
	k := len(p.subjs)
	msgs := make([]*nats.Msg, k)
	for i, s := range p.subjs {
		p.n++
		m := nats.NewMsg(s)
		m.Data = p.data
		m.Header.Set(jetstream.MsgIDHeader, s+"/"+strconv.Itoa(p.n))
		m.Header.Set(jetstream.ExpectedStreamHeader, p.stream)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(p.prev[i], 10))
		msgs[i] = m
	}
	fc := jetstreamext.BatchFlowControl{AckTimeout: requestTimeout}
	if k > 8 {
		fc.AckFirst, fc.AckEvery = true, 64
	}
	ack, err := jetstreamext.PublishMsgBatch(ctx, p.js, msgs, fc)
	if err != nil {
		return err
	}
	for i := range p.prev {
		p.prev[i] = ack.Sequence - uint64(k-1-i)
	}
	return nil
}

// parallel runs f(i) for i in [0, n) with at most par running at once.
func parallel(n, par int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, par)
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rawGets GETs the objects, par at a time, reading each body to its end.
func rawGets(ctx context.Context, objs driver.Bucket, keys []string, par int) error {
	return parallel(len(keys), par, func(i int) error {
		rc, err := objs.Get(ctx, keys[i])
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	})
}

// rawPuts PUTs the bodies under the keys, par at a time.
func rawPuts(ctx context.Context, objs driver.Bucket, keys []string, bodies [][]byte, par int) error {
	return parallel(len(keys), par, func(i int) error {
		return objs.Put(ctx, keys[i], bytes.NewReader(bodies[i]), int64(len(bodies[i])))
	})
}
