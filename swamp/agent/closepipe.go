package agent

import (
	"bufio"
	"encoding/json"
	"os"
)

// closePipes are how the extension reaches the agent at swamp's exit, when
// swamp runs nothing asynchronous any more: it writes one close request to
// in and reads the answer from out, both synchronously (Deno's "unload"
// event). The agent's hello names their directory ("close"); without them
// (not Unix) the agent publishes when its input ends, after swamp's exit.
type closePipes struct {
	dir     string
	in, out *os.File
}

// serve answers the close requests read from in with fn until in is closed.
func (p *closePipes) serve(fn func(req Request, line []byte) Response) {
	sc := bufio.NewScanner(p.in)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var req Request
		resp := Response{Error: &Failure{Kind: "error", Message: "bad close request"}}
		if json.Unmarshal(sc.Bytes(), &req) == nil {
			resp = fn(req, sc.Bytes())
		}
		b, _ := json.Marshal(resp)
		if _, err := p.out.Write(append(b, '\n')); err != nil {
			return
		}
	}
}

// Close closes the pipes and removes their directory.
func (p *closePipes) Close() {
	for _, f := range []*os.File{p.in, p.out} {
		if f != nil {
			f.Close()
		}
	}
	os.RemoveAll(p.dir)
}
