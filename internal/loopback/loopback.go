// Package loopback holds the one check of whether an address stays on this
// machine: the server's listen address (embedded), the dashboard's listen
// address (the CLI) and the Host header the dashboard answers (ui) all use
// Host. It is its own package so that the CLI can check an address without
// linking the embedded NATS server (issue 17).
package loopback

import (
	"net"
	"strings"
)

// Host reports whether addr is certainly this machine's loopback: "localhost"
// (any case) or a loopback IP, given alone ("127.0.0.1", "::1", "[::1]") or
// with a port ("localhost:8080", "[::1]:80"), as in a listen address or an
// HTTP Host header. Any other name is treated as reachable from the network.
func Host(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
