// Package freeport hands out loopback addresses for the processes a test
// or the bench starts with an address given in advance (--listen), and
// may restart on the same one.
//
// An address taken by listening on port 0 and closing again is free only
// for a moment: the kernel may give that port to the next listen on port
// 0 or to any outgoing connection of any process before the node binds it,
// and the node fails to start ("address already in use"). The ports here
// come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which the kernel never hands out by
// itself; a port is checked free when it is handed out, and never handed
// out twice by one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// tries bounds the random ports Port tries before it falls back to
// the kernel's choice.
const tries = 200

// Loopback is 127.0.0.1 with a port from Port.
func Loopback() (string, error) {
	port, err := Port()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), err
}

// Port is a loopback port free at the time of the call, from Range. Where
// the ephemeral range leaves no room below it, the port is the kernel's
// choice (free only for a moment).
func Port() (int, error) {
	lo, hi := Range()
	for n := 0; n < tries && hi-lo >= 1000; n++ {
		port := lo + rand.IntN(hi-lo)
		if !handedOut.take(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // someone else's: try another
		}
		return port, l.Close()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	return l.Addr().(*net.TCPAddr).Port, l.Close()
}

// Range is the ports Port picks from, [lo, hi): the upper half of the
// ports below the ephemeral range (16384-32767 with Linux's default range
// 32768-60999, also below the BSDs' and macOS's 49152), never below 10000.
// Without the kernel's file (not Linux), Linux's default is assumed.
func Range() (lo, hi int) {
	first := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				first = n
			}
		}
	}
	return max(first/2, 10000), first
}

// ports is a set of ports this process handed out.
type ports struct {
	mu   sync.Mutex
	seen map[int]bool
}

var handedOut = ports{seen: map[int]bool{}}

// take marks port handed out; false when it already was.
func (p *ports) take(port int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[port] {
		return false
	}
	p.seen[port] = true
	return true
}
