//go:build unix

package agent

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openClosePipes makes the agent's close pipes (closePipes): two FIFOs in a
// new private directory, each opened for reading and writing, so that the
// extension's opens never wait and its read of out ends if the agent dies.
func openClosePipes() (*closePipes, error) {
	dir, err := os.MkdirTemp("", "syncledger-agent-")
	if err != nil {
		return nil, err
	}
	p := &closePipes{dir: dir}
	for _, f := range []struct {
		name string
		to   **os.File
	}{{"in", &p.in}, {"out", &p.out}} {
		path := filepath.Join(dir, f.name)
		if err := unix.Mkfifo(path, 0o600); err != nil {
			p.Close()
			return nil, err
		}
		if *f.to, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}
