package testmain

import (
	"flag"
	"strconv"
)

// Parallel raises -test.parallel (how many t.Parallel tests run at once; by
// default GOMAXPROCS) to at least n, unless the command line set it. It is for
// a package whose tests mostly wait on the processes and servers they start,
// not on the CPU: cmd/syncledger's end-to-end tests run the CLI dozens of
// times each. Call it from TestMain before m.Run.
func Parallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	raise(flag.CommandLine, n)
}

// raise sets fs's test.parallel to at least n unless it was set explicitly.
func raise(fs *flag.FlagSet, n int) {
	f := fs.Lookup("test.parallel")
	if f == nil {
		return
	}
	set := false
	fs.Visit(func(v *flag.Flag) { set = set || v == f })
	if cur, err := strconv.Atoi(f.Value.String()); !set && err == nil && cur < n {
		f.Value.Set(strconv.Itoa(n))
	}
}
