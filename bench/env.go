package bench

import (
	"cmp"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"go/build"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/nats-io/nats.go"

	"github.com/syncledger/syncledger/internal/s3test"
	"github.com/syncledger/syncledger/ledger"
	"github.com/syncledger/syncledger/ledger/driver"
	"github.com/syncledger/syncledger/ledger/fileblob"
	"github.com/syncledger/syncledger/ledger/natsjs"
	"github.com/syncledger/syncledger/ledger/s3blob"
)

// S3 server choices (Config.S3).
const (
	S3Auto      = "auto"      // SYNCLEDGER_TEST_S3_ENDPOINT if set, else start versitygw
	S3Versitygw = "versitygw" // start a versitygw process (posix backend in the scratch directory)
	S3Env       = "env"       // the server at SYNCLEDGER_TEST_S3_ENDPOINT (scripts/versitygw.sh)
	S3Fake      = "fake"      // gofakes3 in this process (not a real S3 server: say so)
)

// env is one harness run's servers and scratch space.
type env struct {
	cfg     Config
	scratch string // this run's directory (removed at close unless Config.Keep)
	nats    *child
	natsURL string
	s3      *s3Server
	runID   string // unique per run: the S3 prefixes' root, so that runs on a shared server never meet
	names   atomic.Int64
}

func (e *env) logf(format string, args ...any) {
	if e.cfg.Log != nil {
		fmt.Fprintf(e.cfg.Log, format+"\n", args...)
	}
}

// defaultScratch is /dev/shm when present (file creation on this machine class's
// /tmp costs 1–2 ms), else the system temp directory.
func defaultScratch() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "syncledger-bench-probe-*"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

func newEnv(ctx context.Context, cfg Config) (_ *env, err error) {
	parent := cfg.Scratch
	if parent == "" {
		parent = defaultScratch()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "syncledger-bench-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	e := &env{cfg: cfg, scratch: dir, runID: "syncledger-bench-" + time.Now().UTC().Format("20060102T150405") + "-" + filepath.Base(dir)[len("syncledger-bench-"):]}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.nats, err = e.startChild(childSpec{Role: "nats", Dir: e.path("nats")})
	if err != nil {
		return nil, err
	}
	res, err := e.nats.result()
	if err != nil {
		return nil, fmt.Errorf("nats child: %w", err)
	}
	e.natsURL = res.URL
	if e.s3, err = startS3(ctx, cfg.S3, e.path("s3"), cfg.Log); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	if e.s3 != nil && e.s3.external && !e.cfg.Keep {
		// The server outlives the run: what the run stored there goes.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		n, err := s3test.Empty(ctx, s3Client(e.s3.cfg), e.s3.cfg.Bucket, e.runID+"/")
		cancel()
		if err != nil {
			e.logf("S3 server: remove what the run stored under %s/: %v", e.runID, err)
		} else {
			e.logf("S3 server: removed the %d objects the run stored under %s/", n, e.runID)
		}
	}
	if e.s3 != nil && e.s3.stop != nil {
		e.s3.stop()
	}
	if e.nats != nil {
		e.nats.stdin.Close() // the child shuts its server down on EOF
		done := make(chan struct{})
		go func() { _ = e.nats.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = e.nats.cmd.Process.Kill()
			<-done
		}
	}
	if !e.cfg.Keep {
		os.RemoveAll(e.scratch)
	}
}

// path returns a path under the scratch directory.
func (e *env) path(elem ...string) string {
	return filepath.Join(append([]string{e.scratch}, elem...)...)
}

// name returns a fresh ledger (or prefix) name with the given stem.
func (e *env) name(stem string) string { return fmt.Sprintf("%s-%d", stem, e.names.Add(1)) }

// connect opens a client connection to the NATS child.
func (e *env) connect() (*nats.Conn, error) {
	nc, err := nats.Connect(e.natsURL, nats.Name("syncledger-bench"), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", e.natsURL, err)
	}
	return nc, nil
}

// createLedger creates a ledger with a fresh name.
func (e *env) createLedger(ctx context.Context, nc *nats.Conn, stem string) (*natsjs.Log, error) {
	return natsjs.CreateLog(ctx, nc, natsjs.LedgerConfig{Name: e.name(stem), Blobs: "file:///bench"})
}

// fileObjects is a file object store's driver under the scratch directory.
func (e *env) fileObjects(elem ...string) (driver.Bucket, error) {
	return fileblob.New(fileblob.Config{Dir: e.path(elem...)})
}

// noRetry is the retry policy of the scenarios' buckets where they measure the
// stores' own speed: one attempt, as the raw loops make.
var noRetry = ledger.RetryPolicy{Attempts: 1}

// s3Objects is an S3 object store under a fresh prefix (below the run's own
// root, which close empties on a server given by SYNCLEDGER_TEST_S3_ENDPOINT).
func (e *env) s3Objects(ctx context.Context, stem string) (*s3blob.Store, error) {
	cfg := e.s3.cfg
	cfg.Prefix = e.runID + "/" + e.name(stem)
	return s3blob.New(ctx, cfg)
}

// cpu is the CPU time used so far by this process, the NATS child and the S3
// server (when it is a process whose pid is known).
type cpuSample struct{ client, nats, s3 time.Duration }

func (e *env) cpu() cpuSample {
	c := cpuSample{client: selfCPU(), nats: procCPU(e.nats.pid)}
	if e.s3 != nil {
		c.s3 = procCPU(e.s3.pid)
	}
	return c
}

func (c cpuSample) sub(d cpuSample) cpuSample {
	return cpuSample{c.client - d.client, c.nats - d.nats, c.s3 - d.s3}
}

// s3Server is the S3 server the S3 rows use.
type s3Server struct {
	kind string // for the report
	cfg  s3blob.Config
	pid  int // 0: in this process, or unknown
	stop func()
	// external: the server was given (SYNCLEDGER_TEST_S3_ENDPOINT) and
	// outlives the run.
	external bool
}

func startS3(ctx context.Context, mode, dir string, log io.Writer) (*s3Server, error) {
	endpoint := os.Getenv("SYNCLEDGER_TEST_S3_ENDPOINT")
	switch mode {
	case "", S3Auto:
		if endpoint != "" {
			return externalS3(ctx, endpoint)
		}
		return startVersitygw(ctx, dir, log)
	case S3Env:
		if endpoint == "" {
			return nil, errors.New("S3 server: SYNCLEDGER_TEST_S3_ENDPOINT is not set (eval \"$(scripts/versitygw.sh)\")")
		}
		return externalS3(ctx, endpoint)
	case S3Versitygw:
		return startVersitygw(ctx, dir, log)
	case S3Fake:
		return fakeS3(ctx)
	}
	return nil, fmt.Errorf("S3 server %q: want %s, %s, %s or %s", mode, S3Auto, S3Versitygw, S3Env, S3Fake)
}

// externalS3 uses the server scripts/versitygw.sh started (or any S3 server the
// SYNCLEDGER_TEST_S3_* variables name), with the SDK's default credentials.
func externalS3(ctx context.Context, endpoint string) (*s3Server, error) {
	bucket := os.Getenv("SYNCLEDGER_TEST_S3_BUCKET")
	if bucket == "" {
		bucket = "syncledger-test"
	}
	cfg := s3blob.Config{Bucket: bucket, Endpoint: endpoint, PathStyle: true}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		cfg.Region = s3blob.DefaultRegion
	}
	srv := &s3Server{kind: "S3 server at " + endpoint + " (SYNCLEDGER_TEST_S3_ENDPOINT)", cfg: cfg, external: true}
	if pid, err := strconv.Atoi(os.Getenv("VERSITYGW_PID")); err == nil {
		srv.pid = pid
		srv.kind = fmt.Sprintf("versitygw at %s (pid %d, started by scripts/versitygw.sh)", endpoint, pid)
	}
	if err := ensureBucket(ctx, cfg); err != nil {
		return nil, err
	}
	return srv, nil
}

// versitygwBinary finds versitygw on PATH or in GOPATH/bin.
func versitygwBinary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	p := filepath.Join(gopath, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", errors.New("versitygw not found on PATH or in GOPATH/bin: install it with " +
		"`go install github.com/versity/versitygw/cmd/versitygw@v1.8.0` (scripts/versitygw.sh does), " +
		"or point SYNCLEDGER_TEST_S3_ENDPOINT at a running S3 server, or use -s3 fake")
}

// startVersitygw starts versitygw (posix backend in dir) on a free loopback
// port, the command scripts/versitygw.sh documents.
func startVersitygw(ctx context.Context, dir string, log io.Writer) (*s3Server, error) {
	bin, err := versitygwBinary()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	const access, secret = "syncledger", "syncledger-secret"
	logf, err := os.Create(filepath.Join(dir, "versitygw.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+access, "ROOT_SECRET_KEY="+secret)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	stop := func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			b, _ := os.ReadFile(filepath.Join(dir, "versitygw.log"))
			return nil, fmt.Errorf("versitygw did not answer on %s within 30s: %s", endpoint, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cfg := s3blob.Config{
		Bucket: "syncledger-bench", Endpoint: endpoint, Region: s3blob.DefaultRegion, PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
	}
	if err := ensureBucket(ctx, cfg); err != nil {
		stop()
		return nil, err
	}
	return &s3Server{
		kind: fmt.Sprintf("versitygw %s (pid %d, posix backend in the scratch directory, %s)", versitygwVersion(bin), cmd.Process.Pid, endpoint),
		cfg:  cfg, pid: cmd.Process.Pid, stop: stop,
	}, nil
}

// versitygwVersion is the module version the binary was built from.
func versitygwVersion(bin string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(version unknown)"
}

// fakeS3 is gofakes3 (memory backend) on an httptest server in this process.
func fakeS3(ctx context.Context) (*s3Server, error) {
	const bucket = "syncledger-bench"
	mem := s3mem.New()
	if err := mem.CreateBucket(bucket); err != nil {
		return nil, err
	}
	srv := httptest.NewServer(gofakes3.New(mem, gofakes3.WithTimeSkewLimit(0)).Server())
	cfg := s3blob.Config{
		Bucket: bucket, Endpoint: srv.URL, Region: s3blob.DefaultRegion, PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	return &s3Server{
		kind: "gofakes3 in this process (memory backend; NOT a real S3 server — its CPU counts as client)",
		cfg:  cfg, stop: srv.Close,
	}, nil
}

// s3Client is the SDK's S3 client for cfg's server, for what the store does
// not do (create the bucket, empty a prefix): cfg's credentials, else those
// in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
func s3Client(cfg s3blob.Config) *awss3.Client {
	creds := cfg.Credentials
	if creds == nil {
		creds = credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), "")
	}
	region := cmp.Or(cfg.Region, os.Getenv("AWS_REGION"), s3blob.DefaultRegion)
	return awss3.New(awss3.Options{Region: region, Credentials: creds,
		BaseEndpoint: aws.String(cfg.Endpoint), UsePathStyle: cfg.PathStyle})
}

// ensureBucket creates cfg's bucket if it is missing.
func ensureBucket(ctx context.Context, cfg s3blob.Config) error {
	if err := s3test.EnsureBucket(ctx, s3Client(cfg), cfg.Bucket); err != nil {
		return fmt.Errorf("S3 server %s: %w", cfg.Endpoint, err)
	}
	return nil
}
