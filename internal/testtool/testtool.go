// Package testtool runs this module's tools (the tool directive in go.mod) as
// processes for tests: fake-gcs-server (internal/gcstest) and nats-server
// (ledger/natsjs/natsjstest).
//
// The first Path of a tool in a test process has the go command build it
// (`go tool -n`, which keeps the linked executable in the build cache, so an
// unchanged module costs no compile and no link). Linking a server's library
// into the test binaries instead made each of them several times larger, and
// every package's test binary relinked it on a fresh clone.
package testtool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/syncledger/syncledger/internal/testmain"
)

var (
	mu    sync.Mutex
	built = map[string]*tool{}
)

type tool struct {
	once sync.Once
	path string
	err  error
}

// Path returns the path of the executable of the tool pkg (a package the
// tool directive in go.mod names), built at most once per test process.
func Path(pkg string) (string, error) {
	mu.Lock()
	b := built[pkg]
	if b == nil {
		b = &tool{}
		built[pkg] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.path, b.err = build(pkg) })
	return b.path, b.err
}

// build has the go command build the tool pkg (from the module the test runs
// in) and returns the path of the executable in the build cache. Test
// processes of several packages may ask at once: a file lock lets the first
// build while the others wait, then find it cached.
func build(pkg string) (string, error) {
	// go test puts its own GOROOT/bin first on the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build %s: the go command is not on PATH (%v): run the tests with go test, or put Go's bin directory on PATH", filepath.Base(pkg), err)
	}
	name := filepath.Base(strings.TrimSuffix(pkg, "/v2"))
	unlock := lockFile(filepath.Join(os.TempDir(), "syncledger-testtool-"+name+".lock"))
	defer unlock()
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "tool", "-n", pkg)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build %s (go tool -n): %v\n%s", name, err, stderr.Bytes())
	}
	// -n prints the command go tool would run: the cached executable.
	path := strings.TrimSpace(string(out))
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("build %s: go tool -n printed %q, not an executable (%v)", name, path, err)
	}
	return path, nil
}

// Proc is a running tool process, its output (stdout and stderr) kept.
type Proc struct {
	cmd  *exec.Cmd
	out  *testmain.SyncBuffer
	done chan struct{} // closed when the process has exited
	err  error         // the process's exit, once done is closed
}

// Start runs bin with args and the environment env (nil: this process's).
// The kernel kills it if the test process dies without stopping it (Linux: a
// test timeout's panic runs no cleanup).
func Start(bin string, env []string, args ...string) (*Proc, error) {
	p := &Proc{out: &testmain.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited; Err then returns how.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit (nil if it exited 0); call it once Done is closed.
func (p *Proc) Err() error { return p.err }

// Output is what the process has written so far.
func (p *Proc) Output() string { return p.out.String() }

// ErrExited is WaitReady's error for a process that exited before it was ready.
var ErrExited = errors.New("exited before it was ready")

// WaitReady calls ready every interval until it reports true, the process
// exits (ErrExited, with how and its output) or timeout passes (the process is
// then killed).
func (p *Proc) WaitReady(timeout, interval time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ready() {
		select {
		case <-p.done:
			return fmt.Errorf("%w (%v); its output:\n%s", ErrExited, p.err, p.Output())
		case <-time.After(interval):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("not ready within %v; its output:\n%s", timeout, p.Output())
		}
	}
	return nil
}

// Kill kills the process and waits for it to exit.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to exit (SIGTERM; on Windows, which has no such
// signal, it kills it), waits up to grace, then kills it. It reports whether
// the process exited on its own.
func (p *Proc) Stop(grace time.Duration) bool {
	if runtime.GOOS == "windows" || p.cmd.Process.Signal(syscall.SIGTERM) != nil {
		p.Kill()
		return false
	}
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}
