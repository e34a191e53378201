package natsauth

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Probe is a message a user may or may not be refused: what status and
// swamp doctor send to learn whether the server's permissions are this
// build's (Assess). Each changes nothing if the server lets it through: a
// publish on a subject nothing reads, or a request the server answers with
// an error (a name in the body that is not the subject's).
type Probe struct {
	What    string // what being let through would mean
	Subject string
	Body    []byte
	Request bool // a JetStream API request, answered if let through
}

// Probes are the probes of a scope: the version marker (Marker: a user
// refused it has older permissions), and the requests no role below the
// admin is let through in this version (sent to say what older permissions
// let it do).
func Probes(s Scope) (marker Probe, refused []Probe) {
	n := namesOf(s)
	marker = Probe{What: fmt.Sprintf("permissions older than version %d", Version), Subject: Marker()}
	mismatch := func(what, subject string, body map[string]any) Probe {
		b, _ := json.Marshal(body)
		return Probe{What: what, Subject: subject, Body: b, Request: true}
	}
	refused = []Probe{
		mismatch("changing the ledger's stream", "$JS.API.STREAM.UPDATE."+n.stream, map[string]any{"name": "_syncledger_probe"}),
		mismatch("creating consumers on the ledger's stream", "$JS.API.CONSUMER.CREATE."+n.stream+"._syncledger_probe",
			map[string]any{"stream_name": n.stream, "config": map[string]any{"name": "_syncledger_probe_other"}}),
		mismatch("creating the swamp bucket", "$JS.API.STREAM.CREATE."+n.swStream, map[string]any{"name": "_syncledger_probe"}),
		mismatch("creating the heartbeat bucket", "$JS.API.STREAM.CREATE."+n.hbStream, map[string]any{"name": "_syncledger_probe"}),
		mismatch("creating the dead-letter stream", "$JS.API.STREAM.CREATE."+n.dlqStream, map[string]any{"name": "_syncledger_probe"}),
		mismatch("creating durable consumers", "$JS.API.CONSUMER.DURABLE.CREATE."+n.stream+"._syncledger_probe",
			map[string]any{"stream_name": n.stream, "config": map[string]any{"durable_name": "_syncledger_probe_other"}}),
	}
	return marker, refused
}

// Finding is what the probes say of a user's permissions.
type Finding struct {
	// Older: the user's permissions were not rendered by this version.
	Older bool `json:"older,omitempty"`
	// Wider lists what the server lets this user do that no role below the
	// admin may in this version (Probe.What).
	Wider []string `json:"wider,omitempty"`
}

// Assess turns the probes' outcomes into a Finding: refused[p.Subject]
// says whether the server refused probe p (missing: not sent).
// A user the marker is let through (this version's permissions, an admin)
// has nothing to report.
func Assess(s Scope, refused map[string]bool) Finding {
	marker, must := Probes(s)
	if !refused[marker.Subject] {
		return Finding{}
	}
	f := Finding{Older: true}
	for _, p := range must {
		if r, sent := refused[p.Subject]; sent && !r {
			f.Wider = append(f.Wider, p.What)
		}
	}
	return f
}

// Problem says what is wrong with the permissions f describes, and how to
// render them again; "" when nothing is.
func (f Finding) Problem(ledgerName string) string {
	if !f.Older {
		return ""
	}
	msg := fmt.Sprintf("the NATS server's permissions for this user are older than this build's (version %d)", Version)
	if len(f.Wider) > 0 {
		msg += ": they let it do what no role below the admin may now (" + strings.Join(f.Wider, ", ") + ")"
	}
	return msg + fmt.Sprintf("; render them again: syncledger --ledger %s config permissions --user NAME:ROLE … (or restart serve with this build)", ledgerName)
}
