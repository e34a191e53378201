//go:build !failpoints

package natsjs

// faults holds the fault-injection hooks of a Log. In a normal build it is
// empty and its methods do nothing, so the compiler removes every call: the
// product carries no fault-injection code. Tests that inject faults build with
// -tags failpoints (faults_failpoints.go), as etcd's gofail does.
type faults struct{}

func (faults) failSend(attempt int) error { return nil }
func (faults) loseAck(attempt int) bool   { return false }
func (faults) partOneAbsent()             {}
