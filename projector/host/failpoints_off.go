//go:build !failpoints

package host

// failpoints is empty in a normal build: the named points (failpoints.go,
// -tags failpoints) compile to nothing.
type failpoints struct{}

func (failpoints) at(string) {}
