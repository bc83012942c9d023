package freeport

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLoopbackIsBelowTheEphemeralRange: the addresses handed out are
// distinct, their ports below the range the kernel itself gives to
// listens on port 0 and outgoing connections (read here from the kernel,
// not from Range), and free to listen on.
func TestLoopbackIsBelowTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Fatalf("the kernel's ephemeral range: %v", err)
	}
	ephemeral, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 50 {
		addr, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if port, _ := strconv.Atoi(p); port >= ephemeral || port < 1024 {
			t.Errorf("port %d: not below the ephemeral range (from %d), or a privileged one", port, ephemeral)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		l.Close()
	}
}
