package gcs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2/google"

	"github.com/syncledger/syncledger/internal/backend"
	"github.com/syncledger/syncledger/ledger"
)

const (
	// DefaultEndpoint is the base URL of GCS's JSON API.
	DefaultEndpoint = "https://storage.googleapis.com"
	// DefaultChunkSize is the size of one request of a resumable upload, and the
	// largest object sent in one request.
	DefaultChunkSize = 16 << 20
	// chunkUnit: every chunk of a resumable upload but the last is a multiple of it.
	chunkUnit = 256 << 10
	// scope is the OAuth2 scope Application Default Credentials are asked for.
	scope = "https://www.googleapis.com/auth/devstorage.read_write"
)

// Config configures a Store.
type Config struct {
	// Bucket is the bucket's name (required).
	Bucket string
	// Prefix is the key prefix of the store inside the bucket ("" for the whole
	// bucket). Leading and trailing slashes are ignored; it is a directory: Prefix
	// "a" holds "a/x", never "ab/x".
	Prefix string
	// Endpoint is the base URL of the JSON API. "" means STORAGE_EMULATOR_HOST
	// ("host:port" or a URL) when that is set, else DefaultEndpoint.
	Endpoint string
	// HTTPClient sends the requests and must authorize them. Nil means a client
	// from Application Default Credentials, or a plain one for an emulator
	// (STORAGE_EMULATOR_HOST set and Endpoint "").
	HTTPClient *http.Client
	// ChunkSize is the size of each request of a resumable upload, rounded up to a
	// multiple of 256 KiB; objects up to it go in one request. 0 means
	// DefaultChunkSize.
	ChunkSize int
}

// Store is a ledger.ObjectStore on a GCS bucket. It is safe for concurrent use.
type Store struct {
	hc        *http.Client
	base      string // endpoint without trailing slash
	bucket    string
	root      string // "" or the prefix with one trailing slash
	chunkSize int
}

var _ ledger.ObjectStore = (*Store)(nil)

// New validates cfg and returns the Store. It makes no request: a missing bucket or
// bad credentials show on first use (finding Application Default Credentials may
// read a file or the environment).
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("new gcs store: Config.Bucket is empty: %w", ledger.ErrInvalid)
	}
	if strings.ContainsAny(cfg.Bucket, "/\\ ") {
		return nil, fmt.Errorf("new gcs store: bucket name %q: %w", cfg.Bucket, ledger.ErrInvalid)
	}
	var root string
	if p := strings.Trim(cfg.Prefix, "/"); p != "" {
		if err := backend.ValidateKey(p); err != nil {
			return nil, fmt.Errorf("new gcs store: Config.Prefix: %w", err)
		}
		root = p + "/"
	}
	if cfg.ChunkSize < 0 {
		return nil, fmt.Errorf("new gcs store: Config.ChunkSize %d is negative: %w", cfg.ChunkSize, ledger.ErrInvalid)
	}
	s := &Store{hc: cfg.HTTPClient, base: cfg.Endpoint, bucket: cfg.Bucket, root: root, chunkSize: DefaultChunkSize}
	if cfg.ChunkSize > 0 {
		s.chunkSize = (cfg.ChunkSize + chunkUnit - 1) / chunkUnit * chunkUnit
	}
	emulator := false
	if s.base == "" {
		if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
			emulator = true
			s.base = host
			if !strings.Contains(host, "://") {
				s.base = "http://" + host
			}
		} else {
			s.base = DefaultEndpoint
		}
	}
	s.base = strings.TrimSuffix(s.base, "/")
	if u, err := url.Parse(s.base); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("new gcs store: endpoint %q is not an http(s) URL: %w", s.base, ledger.ErrInvalid)
	}
	if s.hc == nil {
		if emulator {
			s.hc = &http.Client{}
		} else {
			// The token source refreshes with this context long after New returns.
			hc, err := google.DefaultClient(context.WithoutCancel(ctx), scope)
			if err != nil {
				return nil, fmt.Errorf("new gcs store: Application Default Credentials: %w "+
					"(run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a key file)", err)
			}
			s.hc = hc
		}
	}
	return s, nil
}

// Close implements io.Closer; the store holds nothing to release.
func (s *Store) Close() error { return nil }

// PreferPut implements ledger.PutPreferrer: an object up to 1 MiB, sent in one
// request, is sent again rather than asked for first (one request, not two).
func (s *Store) PreferPut(size int64) bool { return size >= 0 && size <= 1<<20 }

// objectURL is the JSON API URL of the object named key.
func (s *Store) objectURL(key string) string {
	return s.base + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o/" + url.PathEscape(s.root+key)
}

// uploadURL is the upload URL of the object named key for uploadType typ.
func (s *Store) uploadURL(key, typ string) string {
	return s.base + "/upload/storage/v1/b/" + url.PathEscape(s.bucket) + "/o?uploadType=" + typ + "&name=" + url.QueryEscape(s.root+key)
}

// apiError is an answer other than the one expected.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("gcs: HTTP %d", e.status)
	}
	return fmt.Sprintf("gcs: HTTP %d: %s", e.status, e.msg)
}

// Is makes a 404 match ledger.ErrNotFound.
func (e *apiError) Is(target error) bool {
	return target == ledger.ErrNotFound && e.status == http.StatusNotFound
}

// responseError reads an error answer (and closes its body).
func responseError(resp *http.Response) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var doc struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &doc) == nil && doc.Error.Message != "" {
		msg = doc.Error.Message
	}
	return &apiError{status: resp.StatusCode, msg: msg}
}

// do sends a request and returns the answer if its status is one of ok (the
// caller closes its body), else the error it carries.
func (s *Store) do(ctx context.Context, method, u string, body io.Reader, size int64, hdr http.Header, ok ...int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, backend.CtxErr(ctx, err)
	}
	for _, code := range ok {
		if resp.StatusCode == code {
			return resp, nil
		}
	}
	return nil, responseError(resp)
}

// object is the part of an object resource the store reads.
type object struct {
	Name    string    `json:"name"`
	Size    string    `json:"size"` // JSON API sends uint64 as a string
	Updated time.Time `json:"updated"`
	CRC32C  string    `json:"crc32c"`
}

func (o object) size() (int64, error) {
	n, err := strconv.ParseInt(o.Size, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("gcs: object %q: bad size %q", o.Name, o.Size)
	}
	return n, nil
}

func decodeObject(resp *http.Response) (object, error) {
	defer resp.Body.Close()
	var o object
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return o, fmt.Errorf("gcs: decode object resource: %w", err)
	}
	return o, nil
}

// castagnoli is made on first use: making it at start-up cost every command
// 0.2 ms.
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

func encodeCRC(sum uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return base64.StdEncoding.EncodeToString(b[:])
}

// PutObject implements ledger.ObjectStore (see the package doc).
func (s *Store) PutObject(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	pr := backend.NewPutReader(ctx, r, size)
	crc := crc32.New(castagnoli())
	var err error
	if size >= 0 && size <= int64(s.chunkSize) {
		err = s.putOne(ctx, key, io.TeeReader(pr, crc), size, crc)
	} else {
		err = s.putResumable(ctx, key, io.TeeReader(pr, crc), crc)
	}
	if err != nil {
		if rerr := pr.Err(); rerr != nil {
			err = rerr // the content's fault, not the server's
		}
		return fmt.Errorf("put object %q: %w", key, err)
	}
	return nil
}

// putOne sends the object in one request, whose last byte goes only once r has
// ended where size says.
func (s *Store) putOne(ctx context.Context, key string, r io.Reader, size int64, crc hash.Hash32) error {
	var body io.Reader = &exactReader{r: r, left: size}
	if size == 0 {
		if _, err := io.Copy(io.Discard, body); err != nil {
			return err
		}
		body = http.NoBody
	}
	resp, err := s.do(ctx, http.MethodPost, s.uploadURL(key, "media"), body, size,
		http.Header{"Content-Type": {"application/octet-stream"}}, http.StatusOK)
	if err != nil {
		return err
	}
	return checkStored(resp, size, crc)
}

// exactReader reads left bytes from r and holds back the read carrying the last
// of them until r has returned io.EOF, so a request body of Content-Length left
// is never complete when r is longer or fails (r, a backend.PutReader, says why).
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(b []byte) (int, error) {
	if e.left == 0 {
		return e.confirmEOF()
	}
	if int64(len(b)) > e.left {
		b = b[:e.left]
	}
	n, err := e.r.Read(b)
	e.left -= int64(n)
	if e.left == 0 && err == nil {
		if _, err := e.confirmEOF(); err != io.EOF {
			return 0, err
		}
	}
	if err == io.EOF && e.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// confirmEOF reads r once more: io.EOF, or the error of content that goes on.
func (e *exactReader) confirmEOF() (int, error) {
	var one [1]byte
	for {
		n, err := e.r.Read(one[:])
		switch {
		case n > 0:
			return 0, errors.New("content is longer than its declared size")
		case err != nil:
			return 0, err
		}
	}
}

// checkStored checks the object resource the final upload request answered with
// against what was sent.
func checkStored(resp *http.Response, size int64, crc hash.Hash32) error {
	o, err := decodeObject(resp)
	if err != nil {
		return err
	}
	n, err := o.size()
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("gcs: stored %d bytes, sent %d", n, size)
	}
	if o.CRC32C != "" && o.CRC32C != encodeCRC(crc.Sum32()) {
		return fmt.Errorf("gcs: stored CRC32C %s, sent %s", o.CRC32C, encodeCRC(crc.Sum32()))
	}
	return nil
}

// putResumable sends the object as a resumable upload in chunks of chunkSize
// (memory: one chunk). The upload is finalized by the request carrying the last
// byte, sent only after r returned io.EOF without error; on any failure the session
// is cancelled, so no object (or the previous generation) stays visible.
func (s *Store) putResumable(ctx context.Context, key string, r io.Reader, crc hash.Hash32) (err error) {
	resp, err := s.do(ctx, http.MethodPost, s.uploadURL(key, "resumable"), strings.NewReader("{}"), 2,
		http.Header{"Content-Type": {"application/json; charset=UTF-8"}, "X-Upload-Content-Type": {"application/octet-stream"}},
		http.StatusOK)
	if err != nil {
		return fmt.Errorf("start resumable upload: %w", err)
	}
	resp.Body.Close()
	session := resp.Header.Get("Location")
	if session == "" {
		return errors.New("gcs: resumable upload started without a session URL (no Location header)")
	}
	finalized := false
	defer func() {
		if !finalized {
			// Cancel the session (best effort, not under a cancelled ctx): the
			// object never appears, and GCS drops the session within a week anyway.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if resp, derr := s.do(cctx, http.MethodDelete, session, nil, 0, nil, 499, http.StatusNoContent, http.StatusOK); derr == nil {
				resp.Body.Close()
			}
		}
	}()
	// Read one byte past each chunk to know whether it is the last.
	buf := make([]byte, s.chunkSize+1)
	filled := 0
	var off int64
	for {
		n, rerr := io.ReadFull(r, buf[filled:])
		filled += n
		last := rerr == io.EOF || rerr == io.ErrUnexpectedEOF
		if rerr != nil && !last {
			return rerr
		}
		chunk := filled
		if !last {
			chunk = s.chunkSize
		}
		var rng string
		switch {
		case last && chunk == 0:
			rng = fmt.Sprintf("bytes */%d", off)
		case last:
			rng = fmt.Sprintf("bytes %d-%d/%d", off, off+int64(chunk)-1, off+int64(chunk))
		default:
			rng = fmt.Sprintf("bytes %d-%d/*", off, off+int64(chunk)-1)
		}
		var body io.Reader = bytes.NewReader(buf[:chunk])
		if chunk == 0 {
			body = http.NoBody
		}
		hdr := http.Header{"Content-Range": {rng}}
		if last {
			resp, err := s.do(ctx, http.MethodPut, session, body, int64(chunk), hdr, http.StatusOK, http.StatusCreated)
			if err != nil {
				return fmt.Errorf("finish resumable upload at byte %d: %w", off, err)
			}
			finalized = true
			return checkStored(resp, off+int64(chunk), crc)
		}
		resp, err := s.do(ctx, http.MethodPut, session, body, int64(chunk), hdr, http.StatusPermanentRedirect)
		if err != nil {
			return fmt.Errorf("resumable upload chunk at byte %d: %w", off, err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Range"); got != "" && got != fmt.Sprintf("bytes=0-%d", off+int64(chunk)-1) {
			return fmt.Errorf("gcs: resumable upload: server holds %s after the chunk ending at byte %d", got, off+int64(chunk)-1)
		}
		off += int64(chunk)
		filled = copy(buf, buf[chunk:filled])
	}
}

// GetObject implements ledger.ObjectStore. The reader streams the object and
// checks its length and CRC32C at the end.
func (s *Store) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	// identity: no transparent decompression, so the CRC32C is the stored bytes'.
	resp, err := s.do(ctx, http.MethodGet, s.objectURL(key)+"?alt=media", nil, 0,
		http.Header{"Accept-Encoding": {"identity"}}, http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("get object %q: %w", key, err)
	}
	vr := &verifyReader{ctx: ctx, key: key, rc: resp.Body, size: resp.ContentLength, crc: crc32.New(castagnoli())}
	for _, v := range resp.Header.Values("X-Goog-Hash") {
		for _, h := range strings.Split(v, ",") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(h), "crc32c="); ok {
				vr.want = c
			}
		}
	}
	return vr, nil
}

// verifyReader checks a download's length and CRC32C when it reaches the end.
type verifyReader struct {
	ctx  context.Context
	key  string
	rc   io.ReadCloser
	size int64 // -1: unknown
	want string
	crc  hash.Hash32
	n    int64
}

func (v *verifyReader) Read(b []byte) (int, error) {
	n, err := v.rc.Read(b)
	v.n += int64(n)
	v.crc.Write(b[:n])
	switch {
	case err == io.EOF && v.size >= 0 && v.n != v.size:
		return n, fmt.Errorf("get object %q: read %d of %d bytes: %w", v.key, v.n, v.size, io.ErrUnexpectedEOF)
	case err == io.EOF && v.want != "" && v.want != encodeCRC(v.crc.Sum32()):
		return n, fmt.Errorf("get object %q: CRC32C %s, want %s: content corrupted in transit", v.key, encodeCRC(v.crc.Sum32()), v.want)
	case err != nil && err != io.EOF:
		return n, fmt.Errorf("get object %q: %w", v.key, backend.CtxErr(v.ctx, err))
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }

// StatObject implements ledger.ObjectStore.
func (s *Store) StatObject(ctx context.Context, key string) (ledger.ObjectInfo, error) {
	if err := backend.ValidateKey(key); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	resp, err := s.do(ctx, http.MethodGet, s.objectURL(key)+"?fields=name,size,updated", nil, 0, nil, http.StatusOK)
	if err != nil {
		return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, err)
	}
	o, err := decodeObject(resp)
	if err == nil {
		var n int64
		if n, err = o.size(); err == nil {
			return ledger.ObjectInfo{Key: key, Size: n, ModTime: o.Updated}, nil
		}
	}
	return ledger.ObjectInfo{}, fmt.Errorf("stat object %q: %w", key, backend.CtxErr(ctx, err))
}

// DeleteObject implements ledger.ObjectStore.
func (s *Store) DeleteObject(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	resp, err := s.do(ctx, http.MethodDelete, s.objectURL(key), nil, 0, nil, http.StatusNoContent, http.StatusOK)
	if err != nil {
		if !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("delete object %q: %w", key, err)
		}
		return nil
	}
	resp.Body.Close()
	return nil
}

// ListObjects implements ledger.ObjectStore, page by page (GCS lists names in
// lexical order). fn's error is returned as is.
func (s *Store) ListObjects(ctx context.Context, prefix string, fn func(ledger.ObjectInfo) error) error {
	if err := backend.ValidatePrefix(prefix); err != nil {
		return fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("list objects %q: %w", prefix, err)
	}
	q := url.Values{"prefix": {s.root + prefix}, "fields": {"items(name,size,updated),nextPageToken"}}
	for {
		resp, err := s.do(ctx, http.MethodGet, s.base+"/storage/v1/b/"+url.PathEscape(s.bucket)+"/o?"+q.Encode(), nil, 0, nil, http.StatusOK)
		if err != nil {
			return fmt.Errorf("list objects %q: %w", prefix, err)
		}
		var page struct {
			Items         []object `json:"items"`
			NextPageToken string   `json:"nextPageToken"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("list objects %q: decode page: %w", prefix, backend.CtxErr(ctx, err))
		}
		for _, o := range page.Items {
			key, ok := strings.CutPrefix(o.Name, s.root)
			if !ok || backend.ValidateKey(key) != nil {
				continue // not an object this store could have written
			}
			n, err := o.size()
			if err != nil {
				return fmt.Errorf("list objects %q: %w", prefix, err)
			}
			if err := fn(ledger.ObjectInfo{Key: key, Size: n, ModTime: o.Updated}); err != nil {
				return err
			}
		}
		if page.NextPageToken == "" {
			return nil
		}
		q.Set("pageToken", page.NextPageToken)
	}
}

// Protection reports whether the bucket itself keeps stored objects from being
// lost to a delete or an overwrite by anyone holding write credentials: object
// versioning, or a locked retention policy. how says which, or what is
// missing.
func (s *Store) Protection(ctx context.Context) (protected bool, how string, err error) {
	u := s.base + "/storage/v1/b/" + url.PathEscape(s.bucket) + "?fields=versioning,retentionPolicy"
	resp, err := s.do(ctx, http.MethodGet, u, nil, 0, nil, http.StatusOK)
	if err != nil {
		return false, "", fmt.Errorf("read the settings of bucket %q: %w", s.bucket, err)
	}
	defer resp.Body.Close()
	var b struct {
		Versioning struct {
			Enabled bool `json:"enabled"`
		} `json:"versioning"`
		RetentionPolicy *struct {
			IsLocked bool `json:"isLocked"`
		} `json:"retentionPolicy"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		return false, "", fmt.Errorf("read the settings of bucket %q: %w", s.bucket, err)
	}
	switch {
	case b.Versioning.Enabled:
		return true, "object versioning enabled", nil
	case b.RetentionPolicy != nil && b.RetentionPolicy.IsLocked:
		return true, "a locked retention policy", nil
	}
	return false, "neither object versioning nor a locked retention policy is set on bucket " + s.bucket, nil
}
