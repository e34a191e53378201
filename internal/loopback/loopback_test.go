package loopback

import "testing"

func TestHost(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		// names and addresses alone, as in a listen address's host
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "localhost": true, "LocalHost": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false,
		"localhost.example.com": false, "[10.0.0.1]": false,
		// with a port, as in an HTTP Host header
		"127.0.0.1:8080": true, "[::1]:80": true, "localhost:3000": true, "LOCALHOST:1": true,
		"0.0.0.0:80": false, "[::]:80": false, "evil.example:80": false, "localhost.evil:80": false,
		"192.168.1.2:443": false,
	} {
		if got := Host(addr); got != want {
			t.Errorf("Host(%q) = %v, want %v", addr, got, want)
		}
	}
}
