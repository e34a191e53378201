package main

import (
	"encoding/json"
	"io"
)

// writeJSON is the one writer of every --json output (results, streams, the
// error object): v as compact JSON on a line of its own. A command prints one
// such line (status, hosts, sync, …), or one per item for those that stream
// (log, tail, watch, consume dead-letters), so every output reads the same
// way: one JSON value per line (JSON Lines), ready for a line reader or jq.
// HTML characters are not escaped: paths and messages read as written.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSON writes v to stdout with writeJSON.
func (a *app) printJSON(v any) error { return writeJSON(a.stdout, v) }
