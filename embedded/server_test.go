package embedded

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func startT(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func TestStartJetStreamAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: dir, SyncAlways: true})
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") || s.Port() == 0 {
		t.Fatalf("ClientURL = %q, Port = %d", s.ClientURL(), s.Port())
	}
	ctx := t.Context()
	// Over TCP, as another process would connect.
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Shutdown()
	s.Shutdown() // idempotent

	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatalf("store not under the data directory: %v", err)
	}

	// The lock is released: a new server opens the same directory and the data.
	s2 := startT(t, Config{Listen: "127.0.0.1:0", DataDir: dir})
	nc2, err := s2.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, _ := jetstream.New(nc2)
	st, err := js2.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != 1 {
		t.Fatalf("after restart: %d messages, want 1", got)
	}
}

func TestSecondStartOnSameDirRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startT(t, Config{Listen: "127.0.0.1:0", DataDir: dir})
	_, err := Start(Config{Listen: "127.0.0.1:0", DataDir: dir})
	var inUse *DirInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrDirInUse) {
		t.Fatalf("second Start: err = %v, want a DirInUseError", err)
	}
	if inUse.PID != os.Getpid() {
		t.Errorf("pid = %d, want %d", inUse.PID, os.Getpid())
	}
	want := fmt.Sprintf("data directory %s is in use by pid %d", dir, os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// TestLockHelperProcess is not a test: TestSecondProcessHoldsLock runs the test
// binary with it to hold a data directory's lock from another process.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv("SYNCLEDGER_EMBEDDED_LOCK_HELPER")
	if dir == "" {
		t.Skip("helper process for TestSecondProcessHoldsLock")
	}
	l, err := lockDir(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	defer l.release()
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin or kills us
	os.Exit(0)
}

func TestSecondProcessHoldsLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), "SYNCLEDGER_EMBEDDED_LOCK_HELPER="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper: %q, %v", line, err)
	}

	_, err = Start(Config{Listen: "127.0.0.1:0", DataDir: dir})
	var inUse *DirInUseError
	if !errors.As(err, &inUse) || inUse.PID != cmd.Process.Pid {
		t.Fatalf("Start beside another process: err = %v, want in use by pid %d", err, cmd.Process.Pid)
	}

	// kill -9: the kernel drops the lock; no stale lock is left behind.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	startT(t, Config{Listen: "127.0.0.1:0", DataDir: dir})
}

func TestListenRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want error // nil: starts
	}{
		{"wildcard without auth", Config{Listen: "0.0.0.0:0"}, ErrInsecure},
		{"empty host without auth", Config{Listen: ":0"}, ErrInsecure},
		{"ipv6 wildcard without auth", Config{Listen: "[::]:0"}, ErrInsecure},
		{"name without auth", Config{Listen: "example.com:0"}, ErrInsecure},
		{"user without password", Config{Listen: "0.0.0.0:0", User: "u"}, ErrConfig},
		{"token and user", Config{Listen: "127.0.0.1:0", Token: "t", User: "u", Password: "p"}, ErrConfig},
		{"no port", Config{Listen: "127.0.0.1"}, ErrConfig},
		{"bad port", Config{Listen: "127.0.0.1:99999"}, ErrConfig},
		{"no data dir", Config{Listen: "127.0.0.1:0", DataDir: "-"}, ErrConfig},
		{"wildcard with token", Config{Listen: "0.0.0.0:0", Token: "s3cret"}, nil},
		{"wildcard with user", Config{Listen: "0.0.0.0:0", User: "u", Password: "p"}, nil},
		{"localhost", Config{Listen: "localhost:0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			switch cfg.DataDir {
			case "-":
				cfg.DataDir = ""
			default:
				cfg.DataDir = t.TempDir()
			}
			s, err := Start(cfg)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				// Refused before anything was created or locked.
				if cfg.DataDir != "" {
					if _, err := os.Stat(filepath.Join(cfg.DataDir, LockFile)); !os.IsNotExist(err) {
						t.Errorf("lock file exists after refusal (%v)", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer s.Shutdown()
			nc, err := s.Connect()
			if err != nil {
				t.Fatal(err)
			}
			nc.Close()
			if cfg.Token != "" || cfg.User != "" {
				// Without credentials the server turns a client away.
				if nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(0)); err == nil {
					nc.Close()
					t.Fatal("connected without credentials")
				}
			}
		})
	}
	if !strings.Contains(fmt.Sprint(mustErr(Start(Config{Listen: "0.0.0.0:4222", DataDir: t.TempDir()}))), "not a loopback address") {
		t.Error("insecure refusal does not say why")
	}
}

func mustErr(_ *Server, err error) error { return err }

func TestPortInUseFailsFast(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	start := time.Now()
	_, err = Start(Config{Listen: l.Addr().String(), DataDir: dir, StartTimeout: 20 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("err = %v, want address already in use", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to report a taken port", d)
	}
	// The lock was released with the failure.
	s := startT(t, Config{Listen: "127.0.0.1:0", DataDir: dir})
	s.Shutdown()
}
