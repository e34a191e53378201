package faulty

import (
	"bytes"
	"io"
	"net/http"
)

// Transport is an http.RoundTripper that injects faults into the requests it
// forwards to Base (nil: http.DefaultTransport): 503 answers (ServerError),
// requests that hang (Timeout), connections reset while a body is sent or
// received (Reset), response bodies cut short (Truncate), slow answers (Slow),
// and answers lost after the server acted on a PUT, POST or DELETE (LostAck).
// Give it to an S3 client (s3.Config.HTTPClient) or a GCS client
// (option.WithHTTPClient) in front of a fake or real server.
type Transport struct {
	*dice
	Base http.RoundTripper
}

// NewTransport returns a Transport drawing faults from cfg.
func NewTransport(base http.RoundTripper, cfg Config) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{dice: newDice(cfg), Base: base}
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Method + " " + req.URL.Path
	writes := req.Method == http.MethodPut || req.Method == http.MethodPost || req.Method == http.MethodDelete || req.Method == http.MethodPatch
	allowed := []Fault{ServerError, Timeout, Reset, Slow}
	if writes {
		allowed = append(allowed, LostAck)
	} else {
		allowed = append(allowed, Truncate)
	}
	f := t.draw("http", key, allowed...)
	switch f {
	case ServerError:
		drain(req)
		return &http.Response{
			Status: "503 Service Unavailable", StatusCode: http.StatusServiceUnavailable,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:  http.Header{"Content-Type": {"application/xml"}, "Retry-After": {"0"}},
			Body:    io.NopCloser(bytes.NewReader([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>injected fault</Message></Error>`))),
			Request: req, ContentLength: -1,
		}, nil
	case Timeout:
		drain(req)
		return nil, t.hang(req.Context(), "http", key)
	case Reset:
		if writes && req.Body != nil {
			_, _ = io.CopyN(io.Discard, req.Body, 512)
			req.Body.Close()
			return nil, &Error{Op: "http", Key: key, Fault: Reset}
		}
	case Slow:
		sleep(req.Context(), t.cfg.Delay)
	}
	resp, err := t.Base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch f {
	case LostAck:
		resp.Body.Close()
		return nil, &Error{Op: "http", Key: key, Fault: LostAck}
	case Reset, Truncate:
		if resp.StatusCode/100 == 2 && resp.ContentLength != 0 {
			resp.Body = &faultyBody{ReadCloser: resp.Body, ctx: req.Context(), key: key, fault: f}
			if f == Truncate && req.Header.Get("Range") == "" && resp.ContentLength > 0 && t.dice.cleanCut(key) {
				// A body that ends early and says so: the length matches
				// what arrives, so only a checksum can tell.
				resp.ContentLength = -1
				resp.Header.Del("Content-Length")
			}
		}
	case Slow:
		resp.Body = &faultyBody{ReadCloser: resp.Body, ctx: req.Context(), key: key, fault: Slow, delay: t.cfg.Delay}
	}
	return resp, nil
}

// cleanCut decides (deterministically) whether a truncation also drops the
// length header.
func (d *dice) cleanCut(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.calls["clean\x00"+key]
	d.calls["clean\x00"+key] = n + 1
	return splitmix(d.cfg.Seed^uint64(len(key))^n)%2 == 0
}

func drain(req *http.Request) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
}

// Client returns an http.Client using t.
func (t *Transport) Client() *http.Client { return &http.Client{Transport: t} }
