// Package loopback tells whether a host name or address stays on this machine.
// It is its own package so that the CLI can check an address without linking
// the embedded NATS server (issue 17).
package loopback

import "net"

// Host reports whether host is "localhost" or a loopback IP.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
