// Command natsinfo is the baseline of the harness's start-up scenario (B11): the
// least a nats.go program does to answer what a no-op sync asks. It connects,
// sends one JetStream STREAM.INFO request for the stream named by its argument,
// checks that the answer is not an error, and exits. Its whole-process time and
// peak RSS are what `syncledger version` and a no-op `syncledger sync` are
// measured against.
//
//	natsinfo NATS_URL STREAM
package main

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: natsinfo NATS_URL STREAM")
		os.Exit(2)
	}
	nc, err := nats.Connect(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsinfo:", err)
		os.Exit(1)
	}
	defer nc.Close()
	msg, err := nc.Request("$JS.API.STREAM.INFO."+os.Args[2], nil, 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsinfo:", err)
		os.Exit(1)
	}
	if bytes.Contains(msg.Data, []byte(`"error"`)) {
		fmt.Fprintf(os.Stderr, "natsinfo: %s\n", msg.Data)
		os.Exit(1)
	}
}
