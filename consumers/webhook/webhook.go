// Package webhook is the webhook consumer: a consumers.Handler that POSTs each
// commit, as a consumers.Summary in JSON, to a URL.
//
// Each request carries
//
//	Content-Type: application/json
//	Idempotency-Key: <commit id>
//	X-Syncledger-Signature: sha256=<hex HMAC-SHA256 of the body with the shared secret>
//	X-Syncledger-Ledger: <ledger name>
//	X-Syncledger-Seq: <commit seq>
//
// A 2xx answer acknowledges the commit. A transport error, a timeout, a 5xx,
// 408, 425 or 429 is retried by the Runner with backoff; any other answer
// (4xx, or a redirect, which is not followed) is permanent: the commit goes to
// the dead-letter subject at once. Delivery is at least once — a crash between
// the POST and the acknowledgement posts the commit again — so receivers
// deduplicate by Idempotency-Key. Receivers check the signature with Verify.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/syncledger/syncledger/consumers"
	"github.com/syncledger/syncledger/ledger"
)

// Header names.
const (
	HeaderSignature   = "X-Syncledger-Signature"
	HeaderIdempotency = "Idempotency-Key"
	HeaderLedger      = "X-Syncledger-Ledger"
	HeaderSeq         = "X-Syncledger-Seq"
)

// DefaultTimeout bounds one POST when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Config configures a Handler.
type Config struct {
	URL    string // http or https
	Secret []byte // HMAC-SHA256 key shared with the receiver; required
	Ledger string // ledger name, in each body and header
	// Timeout bounds one POST, answer included; 0 means DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means a client with Timeout. Redirects are
	// never followed.
	Client *http.Client
	// Blobs, when set, is read for the entries of commits kept in manifests.
	Blobs *ledger.Bucket
	// UserAgent defaults to "syncledger-webhook".
	UserAgent string
}

// Handler posts commits. It is safe for concurrent use.
type Handler struct {
	cfg    Config
	client *http.Client
}

var _ consumers.Handler = (*Handler)(nil)

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("new webhook: URL %q: want http(s)://host/…: %w", cfg.URL, ledger.ErrInvalid)
	}
	if len(cfg.Secret) == 0 {
		return nil, fmt.Errorf("new webhook: no secret: %w", ledger.ErrInvalid)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("new webhook: negative timeout: %w", ledger.ErrInvalid)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "syncledger-webhook"
	}
	c := &http.Client{Timeout: cfg.Timeout}
	if cfg.Client != nil {
		cc := *cfg.Client
		c = &cc
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Handler{cfg: cfg, client: c}, nil
}

// Sign returns the signature header value of body: "sha256=" and the hex
// HMAC-SHA256 of body with secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is body's signature with secret (in constant time).
func Verify(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	Body string // the start of the answer's body
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("webhook answered %d %s", e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("webhook answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Body)
}

// retryable reports whether an answer with this code may succeed later.
func retryable(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500
}

// Handle POSTs c's summary.
func (h *Handler) Handle(ctx context.Context, c consumers.Commit) error {
	s, err := consumers.Summarize(ctx, h.cfg.Ledger, c, h.cfg.Blobs)
	if err != nil {
		return err
	}
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("webhook commit %s: %w", c.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return consumers.Permanent(fmt.Errorf("webhook commit %s: %w", c.ID, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", h.cfg.UserAgent)
	req.Header.Set(HeaderIdempotency, c.ID)
	req.Header.Set(HeaderSignature, Sign(h.cfg.Secret, body))
	req.Header.Set(HeaderLedger, h.cfg.Ledger)
	req.Header.Set(HeaderSeq, strconv.FormatUint(uint64(c.Seq), 10))
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook commit %s: %w", c.ID, redact(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	serr := &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(strings.ToValidUTF8(string(snippet), "?"))}
	if retryable(resp.StatusCode) {
		return fmt.Errorf("webhook commit %s: %w", c.ID, serr)
	}
	return consumers.Permanent(fmt.Errorf("webhook commit %s: %w", c.ID, serr))
}

// redact removes the URL (which may hold credentials) from a client error.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
