//go:build failpoints

package natsjs

// faults holds the fault-injection hooks of a Log, set by tests built with
// -tags failpoints. onSend is called before each publish attempt; an error it
// returns ends the attempt without sending. onAck is called after each attempt
// the server acknowledged; true discards the ack as if it were lost.
// onPartOneAbsent is called when resolve has not found part 1.
type faults struct {
	onSend          func(attempt int) error
	onAck           func(attempt int) bool
	onPartOneAbsent func()
}

func (f faults) failSend(attempt int) error {
	if f.onSend == nil {
		return nil
	}
	return f.onSend(attempt)
}

func (f faults) loseAck(attempt int) bool { return f.onAck != nil && f.onAck(attempt) }

func (f faults) partOneAbsent() {
	if f.onPartOneAbsent != nil {
		f.onPartOneAbsent()
	}
}
