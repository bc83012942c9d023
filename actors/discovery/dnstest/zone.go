// Package dnstest is a DNS server for tests: a zone served with miekg/dns on
// a loopback port, whose records a test changes while it runs. It is used
// by discovery's tests and by the node's end-to-end discovery test.
package dnstest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// Zone is a DNS server started in a test on a loopback port, UDP and TCP
// (the same port), serving records the test changes at run time.
type Zone struct {
	// Addr is the server's host:port.
	Addr string

	mu  sync.Mutex
	rrs []dns.RR
	// glue puts the targets' A/AAAA records in SRV answers' additional section.
	glue bool
	// truncate answers every UDP query truncated and empty.
	truncate bool
	// rcode, when not success, is every answer's.
	rcode int
	// rcodeFor are answer codes of some queries only (a server broken for
	// one name or type), by name ("" any) and type (0 any).
	rcodeFor map[rcodeKey]int

	// UDP and TCP count the queries received over each.
	UDP, TCP atomic.Int64
}

// Start serves records (zone file syntax) until the test ends.
func Start(t testing.TB, records ...string) *Zone {
	t.Helper()
	z := &Zone{}
	z.Set(t, records...)
	var (
		pc  net.PacketConn
		l   net.Listener
		err error
	)
	// The TCP server must share the UDP port (a truncated answer is asked
	// again on the same address); another test may hold it, so try a few.
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatalf("listen udp: %v", err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatalf("listen tcp: %v", err)
	}
	z.Addr = pc.LocalAddr().String()
	var servers []*dns.Server
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: z}, {Listener: l, Handler: z}} {
		started := make(chan struct{})
		done := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go func() {
			defer close(done)
			_ = s.ActivateAndServe()
		}()
		<-started
		servers = append(servers, s)
		t.Cleanup(func() { <-done })
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Shutdown()
		}
	})
	return z
}

// Set replaces the records (zone file syntax).
func (z *Zone) Set(t testing.TB, records ...string) {
	t.Helper()
	var rrs []dns.RR
	for _, r := range records {
		rrs = append(rrs, mustRR(t, r))
	}
	z.mu.Lock()
	z.rrs = rrs
	z.mu.Unlock()
}

// Add adds one record.
func (z *Zone) Add(t testing.TB, record string) {
	t.Helper()
	rr := mustRR(t, record)
	z.mu.Lock()
	z.rrs = append(z.rrs, rr)
	z.mu.Unlock()
}

// Remove removes one record; it must be there.
func (z *Zone) Remove(t testing.TB, record string) {
	t.Helper()
	rr := mustRR(t, record)
	z.mu.Lock()
	defer z.mu.Unlock()
	for i, x := range z.rrs {
		if dns.IsDuplicate(x, rr) {
			z.rrs = append(z.rrs[:i], z.rrs[i+1:]...)
			return
		}
	}
	t.Fatalf("remove %q: not in the zone", record)
}

// Configure sets how the zone answers: glue puts the targets' A/AAAA
// records in SRV answers' additional section; truncate answers every UDP
// query truncated and empty.
func (z *Zone) Configure(glue, truncate bool) {
	z.mu.Lock()
	z.glue, z.truncate = glue, truncate
	z.mu.Unlock()
}

// SetRcode makes every answer carry rc (dns.RcodeSuccess restores).
func (z *Zone) SetRcode(rc int) {
	z.mu.Lock()
	z.rcode = rc
	z.mu.Unlock()
}

// rcodeKey is a name (lower case, fully qualified; "" any) and a type (0 any).
type rcodeKey struct {
	name  string
	qtype uint16
}

// SetRcodeFor makes every answer to a query for name ("" any) of type
// qtype (0 any) carry rc (dns.RcodeSuccess restores): a server broken for
// one name or one type only, as some answer AAAA queries for an IPv4-only
// name NXDOMAIN or SERVFAIL.
func (z *Zone) SetRcodeFor(name string, qtype uint16, rc int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.rcodeFor == nil {
		z.rcodeFor = map[rcodeKey]int{}
	}
	if name != "" {
		name = strings.ToLower(dns.Fqdn(name))
	}
	z.rcodeFor[rcodeKey{name, qtype}] = rc
}

func mustRR(t testing.TB, s string) dns.RR {
	t.Helper()
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("record %q: %v", s, err)
	}
	return rr
}

// ServeDNS answers from the records: NXDOMAIN for a name without any.
func (z *Zone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	tcp := w.LocalAddr().Network() == "tcp"
	if tcp {
		z.TCP.Add(1)
	} else {
		z.UDP.Add(1)
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	z.mu.Lock()
	defer z.mu.Unlock()
	defer func() { _ = w.WriteMsg(m) }()
	if z.rcode != dns.RcodeSuccess {
		m.Rcode = z.rcode
		return
	}
	for _, k := range []rcodeKey{
		{strings.ToLower(req.Question[0].Name), req.Question[0].Qtype},
		{strings.ToLower(req.Question[0].Name), 0},
		{"", req.Question[0].Qtype},
	} {
		if rc := z.rcodeFor[k]; rc != dns.RcodeSuccess {
			m.Rcode = rc
			return
		}
	}
	if z.truncate && !tcp {
		m.Truncated = true
		return
	}
	q := req.Question[0]
	exists := false
	for _, rr := range z.rrs {
		if !strings.EqualFold(rr.Header().Name, q.Name) {
			continue
		}
		exists = true
		if rr.Header().Rrtype != q.Qtype {
			continue
		}
		m.Answer = append(m.Answer, dns.Copy(rr))
		if srv, ok := rr.(*dns.SRV); ok && z.glue {
			for _, g := range z.rrs {
				if strings.EqualFold(g.Header().Name, srv.Target) &&
					(g.Header().Rrtype == dns.TypeA || g.Header().Rrtype == dns.TypeAAAA) {
					m.Extra = append(m.Extra, dns.Copy(g))
				}
			}
		}
	}
	if !exists {
		m.Rcode = dns.RcodeNameError
	}
}
