package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/logging"

	"github.com/syncledger/syncledger/ledger"
)

// client speaks the part of the S3 REST API the Store uses, each request
// signed with the SDK's SigV4 signer, with credentials, region and HTTP client
// from the AWS configuration chain (loadAWS), and retried under the SDK's
// retry policy.
//
// It replaces the SDK's S3 service client (service/s3), whose package inits,
// endpoint rule tables and ~460 interface tables every syncledger command paid
// at start-up, whatever its blob store (issue 17: 0.3 ms of a no-op sync and
// 1.1 MiB of its peak RSS, measured). The requests are the plain REST calls of the S3 API
// reference: object PUT, GET, HEAD, DELETE, ListObjectsV2, the four multipart
// calls and two bucket reads.
type client struct {
	httpc   aws.HTTPClient
	creds   aws.CredentialsProvider
	region  string
	signer  *v4.Signer
	retryer aws.Retryer

	scheme, host string // the endpoint's, with the bucket's name first when virtual-hosted
	bucketPath   string // the path of the bucket: "/BUCKET" (path style) or ""
	bucket       string
}

// emptySHA256 is the SHA-256 of no bytes, the payload hash of a request without body.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// newClient builds the client for cfg, with the AWS configuration chain for
// what cfg leaves out (loadAWS).
func newClient(ctx context.Context, cfg Config) (*client, error) {
	aw, err := loadAWS(cfg)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	c := &client{httpc: aw.httpc, creds: aw.creds, region: aw.region, retryer: aw.retryer,
		signer: v4.NewSigner(func(o *v4.SignerOptions) {
			o.DisableURIPathEscaping = true // S3 signs the path as sent, escaped once
			o.Logger = logging.Nop{}
		}),
		bucket: cfg.Bucket}
	endpoint := aw.endpoint
	if endpoint == "" {
		endpoint = "https://s3." + c.region + ".amazonaws.com"
		if strings.HasPrefix(c.region, "cn-") {
			endpoint += ".cn"
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("S3 endpoint %q: want http(s)://host[:port]: %w", endpoint, ledger.ErrInvalid)
	}
	c.scheme, c.host = u.Scheme, u.Host
	// Virtual-hosted addressing needs a name that is a DNS label, and over
	// TLS one without dots (the certificate covers one level); the SDK falls
	// back to path style for the others the same way.
	if cfg.PathStyle || !dnsBucket(cfg.Bucket) || (u.Scheme == "https" && strings.Contains(cfg.Bucket, ".")) {
		c.bucketPath = "/" + cfg.Bucket
	} else {
		c.host = cfg.Bucket + "." + u.Host
	}
	return c, nil
}

// dnsBucket reports whether a bucket name can be a host name's first labels.
func dnsBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 || b[0] == '-' || b[len(b)-1] == '-' || strings.Contains(b, "..") {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// escapeKey escapes an object key for the request path the way S3 signs it:
// every byte but the unreserved ones and "/" as %XX.
func escapeKey(key string) string {
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.~/", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdig[c>>4])
		b.WriteByte(hexdig[c&15])
	}
	return b.String()
}

// apiError is an S3 error answer. It reports its HTTP status and error code
// the way the SDK's errors do, for ledger.DefaultRetryable and the SDK's
// retryer.
type apiError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *apiError) Error() string {
	msg := e.Code
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request id " + e.RequestID + ")"
	}
	return fmt.Sprintf("S3 answered %d %s", e.Status, msg)
}

// HTTPStatusCode returns the answer's HTTP status.
func (e *apiError) HTTPStatusCode() int { return e.Status }

// ErrorCode returns S3's error code (NoSuchKey, SlowDown, …).
func (e *apiError) ErrorCode() string { return e.Code }

// sendError is a request that got no answer (a refused or reset connection, a
// timeout). It is retried as the SDK retries its own.
type sendError struct{ err error }

func (e *sendError) Error() string         { return e.err.Error() }
func (e *sendError) Unwrap() error         { return e.err }
func (e *sendError) ConnectionError() bool { return true }

// request is one S3 API call.
type request struct {
	method string
	key    string     // "" for a bucket request
	query  url.Values // subresources and parameters
	body   io.ReadSeeker
	size   int64       // of body
	header http.Header // extra headers
}

// do sends req, signed, retrying answers the SDK's retryer deems transient
// (rewinding the body), and returns the response of a 2xx answer, whose body
// the caller closes. Any other answer is an *apiError.
func (c *client) do(ctx context.Context, req request) (*http.Response, error) {
	hash := emptySHA256
	if req.body != nil {
		h := sha256.New()
		if _, err := io.Copy(h, req.body); err != nil {
			return nil, fmt.Errorf("hash the request body: %w", err)
		}
		hash = hex.EncodeToString(h.Sum(nil))
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, req, hash)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || attempt >= c.retryer.MaxAttempts() || !c.retryer.IsErrorRetryable(err) {
			return nil, err
		}
		wait, derr := c.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return nil, err
		}
		if ledger.SleepCtx(ctx, wait) != nil {
			return nil, err
		}
	}
}

func (c *client) once(ctx context.Context, req request, hash string) (*http.Response, error) {
	raw := c.bucketPath + "/"
	path := raw
	if req.key != "" {
		raw += escapeKey(req.key)
		path += req.key
	}
	u := &url.URL{Scheme: c.scheme, Host: c.host, Path: path, RawPath: raw}
	if req.query != nil {
		u.RawQuery = strings.ReplaceAll(req.query.Encode(), "+", "%20")
	}
	var body io.Reader
	if req.body != nil && req.size == 0 {
		body = http.NoBody
	} else if req.body != nil {
		if _, err := req.body.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("rewind the request body: %w", err)
		}
		body = io.NopCloser(req.body) // not closed by the transport: the caller owns it
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	hr.URL = u
	if req.body != nil {
		hr.ContentLength = req.size
	}
	for k, vs := range req.header {
		hr.Header[k] = vs
	}
	hr.Header.Set("X-Amz-Content-Sha256", hash)
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS credentials: %w", err)
	}
	if err := c.signer.SignHTTP(ctx, creds, hr, hash, "s3", c.region, time.Now()); err != nil {
		return nil, fmt.Errorf("sign the request: %w", err)
	}
	resp, err := c.httpc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &sendError{err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readError(resp)
}

// readError reads the error document of a non-2xx answer (a HEAD has none).
func readError(resp *http.Response) error {
	e := &apiError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Amz-Request-Id")}
	var doc struct {
		Code, Message, RequestId string
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err == nil && len(b) > 0 && xml.Unmarshal(b, &doc) == nil {
		e.Code, e.Message = doc.Code, doc.Message
		if doc.RequestId != "" {
			e.RequestID = doc.RequestId
		}
	}
	if e.Code == "" {
		e.Code = http.StatusText(resp.StatusCode)
		if resp.StatusCode == http.StatusNotFound {
			e.Code = "NotFound"
		}
	}
	return e
}

// call does req and decodes the answer's XML document into out (nil: none is
// read). A 200 answer whose document is an <Error> (CompleteMultipartUpload
// may answer so) is an *apiError.
func (c *client) call(ctx context.Context, req request, out any) (http.Header, error) {
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Header, nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &sendError{fmt.Errorf("read the answer: %w", err)}
	}
	var root struct {
		XMLName       xml.Name
		Code, Message string
	}
	if xml.Unmarshal(b, &root) == nil && root.XMLName.Local == "Error" {
		return nil, &apiError{Status: http.StatusInternalServerError, Code: root.Code, Message: root.Message}
	}
	if err := xml.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("undecodable S3 answer: %w", err)
	}
	return resp.Header, nil
}

// putObject sends body (n bytes) as the object key.
func (c *client) putObject(ctx context.Context, key string, body io.ReadSeeker, n int64) error {
	_, err := c.call(ctx, request{method: http.MethodPut, key: key, body: body, size: n,
		header: http.Header{"Content-Type": {"application/octet-stream"}}}, nil)
	return err
}

// getObject returns the object's content as a stream.
func (c *client) getObject(ctx context.Context, key string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, key: key})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// headObject returns the object's size and modification time.
func (c *client) headObject(ctx context.Context, key string) (size int64, mod time.Time, err error) {
	h, err := c.call(ctx, request{method: http.MethodHead, key: key}, nil)
	if err != nil {
		return 0, time.Time{}, err
	}
	size, err = strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("HEAD %s: Content-Length %q: %w", key, h.Get("Content-Length"), err)
	}
	mod, _ = http.ParseTime(h.Get("Last-Modified"))
	return size, mod, nil
}

func (c *client) deleteObject(ctx context.Context, key string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, key: key}, nil)
	return err
}

// listed is one object of a ListObjectsV2 page.
type listed struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// listObjects calls fn for each object whose key starts with prefix, in key
// order, page by page (ListObjectsV2).
func (c *client) listObjects(ctx context.Context, prefix string, fn func(listed) error) error {
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		var page struct {
			Contents              []listed
			IsTruncated           bool
			NextContinuationToken string
		}
		if _, err := c.call(ctx, request{method: http.MethodGet, query: q}, &page); err != nil {
			return err
		}
		for _, o := range page.Contents {
			if err := fn(o); err != nil {
				return err
			}
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return nil
		}
		token = page.NextContinuationToken
	}
}

// createMultipartUpload starts a multipart upload of key and returns its id.
func (c *client) createMultipartUpload(ctx context.Context, key string) (string, error) {
	var out struct{ UploadId string }
	if _, err := c.call(ctx, request{method: http.MethodPost, key: key, query: url.Values{"uploads": {""}},
		header: http.Header{"Content-Type": {"application/octet-stream"}}}, &out); err != nil {
		return "", err
	}
	if out.UploadId == "" {
		return "", errors.New("S3 answered no upload id")
	}
	return out.UploadId, nil
}

// completedPart is a part of a multipart upload as CompleteMultipartUpload names it.
type completedPart struct {
	ETag       string
	PartNumber int
}

// uploadPart sends part num of the upload and returns it as completed.
func (c *client) uploadPart(ctx context.Context, key, upload string, num int, part []byte) (completedPart, error) {
	q := url.Values{"partNumber": {strconv.Itoa(num)}, "uploadId": {upload}}
	h, err := c.call(ctx, request{method: http.MethodPut, key: key, query: q, body: bytes.NewReader(part), size: int64(len(part))}, nil)
	if err != nil {
		return completedPart{}, err
	}
	return completedPart{ETag: h.Get("ETag"), PartNumber: num}, nil
}

// completeMultipartUpload makes the object of the upload's parts appear.
func (c *client) completeMultipartUpload(ctx context.Context, key, upload string, parts []completedPart) error {
	doc, err := xml.Marshal(struct {
		XMLName xml.Name        `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUpload"`
		Parts   []completedPart `xml:"Part"`
	}{Parts: parts})
	if err != nil {
		return err
	}
	var out struct{ Key string }
	_, err = c.call(ctx, request{method: http.MethodPost, key: key, query: url.Values{"uploadId": {upload}},
		body: bytes.NewReader(doc), size: int64(len(doc)), header: http.Header{"Content-Type": {"application/xml"}}}, &out)
	return err
}

func (c *client) abortMultipartUpload(ctx context.Context, key, upload string) error {
	_, err := c.call(ctx, request{method: http.MethodDelete, key: key, query: url.Values{"uploadId": {upload}}}, nil)
	return err
}

// versioning returns the bucket's versioning status ("Enabled", "Suspended" or "").
func (c *client) versioning(ctx context.Context) (string, error) {
	var out struct{ Status string }
	_, err := c.call(ctx, request{method: http.MethodGet, query: url.Values{"versioning": {""}}}, &out)
	return out.Status, err
}

// objectLock returns the bucket's object lock setting ("Enabled" or "").
func (c *client) objectLock(ctx context.Context) (string, error) {
	var out struct{ ObjectLockEnabled string }
	_, err := c.call(ctx, request{method: http.MethodGet, query: url.Values{"object-lock": {""}}}, &out)
	return out.ObjectLockEnabled, err
}
