package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/switchboard-dev/switchboard/actors/discovery/dnstest"
	"github.com/switchboard-dev/switchboard/polltest"
)

const srvName = "_smsc._tcp.example.test."

func newResolver(server string) *resolver {
	return &resolver{server: server, resolvConf: resolvConf, apiPort: 9443, timeout: time.Second}
}

func TestResolverLookup(t *testing.T) {
	base := []string{
		srvName + " 60 IN SRV 10 10 8443 a.example.test.",
		srvName + " 60 IN SRV 10 10 0 b.example.test.", // port 0: the API port
		srvName + " 60 IN SRV 20 10 7000 c.example.test.",
		"a.example.test. 60 IN A 127.0.0.2",
		"b.example.test. 60 IN A 127.0.0.3",
		"b.example.test. 60 IN AAAA 2001:db8::3",
		"c.example.test. 60 IN AAAA 2001:db8::4",
	}
	want := []string{"127.0.0.2:8443", "127.0.0.3:9443", "[2001:db8::3]:9443", "[2001:db8::4]:7000"}
	cases := []struct {
		name      string
		records   []string
		glue      bool
		truncate  bool
		want      []string
		err       string
		usesTCP   bool
		maxQuerys int64
	}{
		{name: "targets resolved by A and AAAA queries", records: base, want: want, maxQuerys: 7},
		{name: "glue in the additional section is used", records: base, glue: true, want: want, maxQuerys: 1},
		{name: "truncated UDP answers are asked again over TCP", records: base, truncate: true, want: want, usesTCP: true},
		{name: "a target without addresses contributes none", records: append([]string{
			srvName + " 60 IN SRV 10 10 8443 gone.example.test.",
			srvName + " 60 IN SRV 10 10 8443 .",
		}, base...), want: want},
		{name: "the same address twice is listed once", records: append([]string{
			srvName + " 60 IN SRV 10 10 8443 a.example.test.",
		}, base...), want: want},
		{name: "no such SRV name", records: base[3:], err: "NXDOMAIN"},
		{name: "no SRV record", records: append([]string{srvName + " 60 IN TXT \"x\""}, base[3:]...), err: "no addresses"},
		{name: "targets without addresses", records: []string{srvName + " 60 IN SRV 10 10 8443 gone.example.test."},
			err: "no addresses"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			z := dnstest.Start(t, tc.records...)
			z.Configure(tc.glue, tc.truncate)
			got, targetErr, err := newResolver(z.Addr).lookup(context.Background(), srvName)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("lookup = %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || targetErr != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("lookup = %v, %v, %v; want %v", got, targetErr, err, tc.want)
			}
			if tc.usesTCP && z.TCP.Load() == 0 {
				t.Fatal("no query came over TCP")
			}
			if q := z.UDP.Load() + z.TCP.Load(); tc.maxQuerys > 0 && q > tc.maxQuerys {
				t.Fatalf("%d queries, want at most %d", q, tc.maxQuerys)
			}
		})
	}
}

func TestResolverServerFailure(t *testing.T) {
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", "a.example.test. 60 IN A 127.0.0.2")
	z.SetRcode(dns.RcodeServerFailure)
	if got, _, err := newResolver(z.Addr).lookup(context.Background(), srvName); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Fatalf("lookup = %v, %v; want SERVFAIL", got, err)
	}
}

func TestResolverTargetFailureKeepsItsLastAddresses(t *testing.T) {
	// The SRV answer is fine but a target's lookup fails: that target
	// keeps the addresses of the last lookup (none if it never had one),
	// the others count, and the failure is told beside them. Only when no
	// target has an address does the lookup fail.
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", srvName+" 60 IN SRV 10 10 8443 b.example.test.",
		"a.example.test. 60 IN A 127.0.0.2", "b.example.test. 60 IN A 127.0.0.3")
	both := []string{"127.0.0.2:8443", "127.0.0.3:8443"}
	r := newResolver(z.Addr)
	if got, targetErr, err := r.lookup(context.Background(), srvName); err != nil || targetErr != nil || !reflect.DeepEqual(got, both) {
		t.Fatalf("lookup = %v, %v, %v; want %v", got, targetErr, err, both)
	}
	z.SetRcodeFor("b.example.test.", 0, dns.RcodeRefused)
	got, targetErr, err := r.lookup(context.Background(), srvName)
	if err != nil || !reflect.DeepEqual(got, both) || targetErr == nil || !strings.Contains(targetErr.Error(), "b.example.test") ||
		!strings.Contains(targetErr.Error(), "REFUSED") {
		t.Fatalf("lookup with b failing = %v, %v, %v; want %v and b's failure", got, targetErr, err, both)
	}
	// A resolver that never looked b up has nothing to keep for it.
	fresh := newResolver(z.Addr)
	if got, targetErr, err := fresh.lookup(context.Background(), srvName); err != nil || targetErr == nil ||
		!reflect.DeepEqual(got, []string{"127.0.0.2:8443"}) {
		t.Fatalf("first lookup with b failing = %v, %v, %v; want a alone and b's failure", got, targetErr, err)
	}
	z.SetRcodeFor("a.example.test.", 0, dns.RcodeRefused)
	if got, _, err := newResolver(z.Addr).lookup(context.Background(), srvName); err == nil || !strings.Contains(err.Error(), "REFUSED") {
		t.Fatalf("lookup with every target failing = %v, %v; want REFUSED", got, err)
	}
}

func TestResolverNextServer(t *testing.T) {
	// A server that is not there (a closed UDP port: the exchange fails)
	// is skipped for the next one.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", "a.example.test. 60 IN A 127.0.0.2")
	r := newResolver("")
	resp, err := r.query(context.Background(), []string{dead, z.Addr}, srvName, dns.TypeSRV)
	if err != nil || len(resp.Answer) != 1 {
		t.Fatalf("query = %v, %v", resp, err)
	}
	if _, err := r.query(context.Background(), []string{dead}, srvName, dns.TypeSRV); err == nil || !strings.Contains(err.Error(), dead) {
		t.Fatalf("query of a dead server = %v; want an error naming it", err)
	}
}

func TestResolverCancel(t *testing.T) {
	// A server that never answers: cancelling the context ends the
	// exchange at once, not at the timeout.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	r := newResolver(pc.LocalAddr().String())
	r.timeout = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := r.lookup(ctx, srvName)
		done <- err
	}()
	buf := make([]byte, 512)
	if _, _, err := pc.ReadFrom(buf); err != nil { // the query arrived
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("lookup = %v, want context.Canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("lookup did not end when cancelled")
	}
}

func TestResolverServersFromResolvConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	conf := "search example.test\nnameserver 10.0.0.53\nnameserver 2001:db8::53\noptions ndots:1\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &resolver{resolvConf: path}
	got, err := r.servers()
	if want := []string{"10.0.0.53:53", "[2001:db8::53]:53"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("servers = %v, %v; want %v", got, err, want)
	}
	r.resolvConf = filepath.Join(t.TempDir(), "missing")
	if _, err := r.servers(); err == nil {
		t.Fatal("a missing resolv.conf gave servers")
	}
	// A configured server wins over the file.
	r.server = "127.0.0.1:5353"
	if got, err := r.servers(); err != nil || !reflect.DeepEqual(got, []string{"127.0.0.1:5353"}) {
		t.Fatalf("servers = %v, %v", got, err)
	}
}

func TestResolverTargetNXDOMAINForOneTypeKeepsTheOther(t *testing.T) {
	// Some servers answer NXDOMAIN for the type a name does not have (an
	// IPv4-only name's AAAA, an IPv6-only name's A), and a name changed
	// between the two queries does too: what the other type answered is
	// the target's addresses, not nothing.
	for _, tc := range []struct {
		name   string
		qtype  uint16
		record string
		want   string
	}{
		{"AAAA NXDOMAIN", dns.TypeAAAA, "a.example.test. 60 IN A 127.0.0.2", "127.0.0.2:8443"},
		{"A NXDOMAIN", dns.TypeA, "a.example.test. 60 IN AAAA 2001:db8::2", "[2001:db8::2]:8443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", tc.record)
			z.SetRcodeFor("", tc.qtype, dns.RcodeNameError)
			got, _, err := newResolver(z.Addr).lookup(context.Background(), srvName)
			if err != nil || !reflect.DeepEqual(got, []string{tc.want}) {
				t.Fatalf("lookup = %v, %v; want [%s]", got, err, tc.want)
			}
		})
	}
}

func TestResolverRelativeNameUsesTheSearchList(t *testing.T) {
	// A name without a final dot is relative, as the system resolver (and
	// dig +search) takes it: in Kubernetes "_smsc._tcp.switchboard" is the
	// headless service of the pod's namespace, through the search list and
	// ndots:5 of /etc/resolv.conf. A name with a final dot is asked as is.
	z := dnstest.Start(t,
		"_smsc._tcp.switchboard.ns.svc.test. 60 IN SRV 10 10 8443 a.example.test.",
		srvName+" 60 IN SRV 10 10 8443 b.example.test.",
		"a.example.test. 60 IN A 127.0.0.2",
		"b.example.test. 60 IN A 127.0.0.3")
	path := filepath.Join(t.TempDir(), "resolv.conf")
	conf := "nameserver 127.0.0.1\nsearch other.test ns.svc.test\noptions ndots:5\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newResolver(z.Addr)
	r.resolvConf = path
	for _, tc := range []struct{ name, want string }{
		{"_smsc._tcp.switchboard", "127.0.0.2:8443"},
		{strings.TrimSuffix(srvName, "."), "127.0.0.3:8443"}, // found as is after the search list
		{srvName, "127.0.0.3:8443"},
	} {
		if got, _, err := r.lookup(context.Background(), tc.name); err != nil || !reflect.DeepEqual(got, []string{tc.want}) {
			t.Errorf("lookup(%q) = %v, %v; want [%s]", tc.name, got, err, tc.want)
		}
	}
	// A form that fails moves on to the next: a search domain's server
	// failing (here other.test's) does not hide the name's own answer. With
	// no form answering records, the failure is the lookup's (the last list
	// is kept), not NXDOMAIN.
	z.SetRcodeFor(strings.TrimSuffix(srvName, ".")+".other.test.", dns.TypeSRV, dns.RcodeServerFailure)
	if got, _, err := r.lookup(context.Background(), strings.TrimSuffix(srvName, ".")); err != nil || !reflect.DeepEqual(got, []string{"127.0.0.3:8443"}) {
		t.Errorf("lookup with a search domain failing = %v, %v; want [127.0.0.3:8443]", got, err)
	}
	z.SetRcodeFor("_smsc._tcp.missing.other.test.", dns.TypeSRV, dns.RcodeServerFailure)
	if _, _, err := r.lookup(context.Background(), "_smsc._tcp.missing"); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Errorf("lookup of a missing name with a search domain failing = %v; want the failure", err)
	}
	z.SetRcodeFor("_smsc._tcp.missing.other.test.", dns.TypeSRV, dns.RcodeSuccess)
	// The search list never hides a failure: a name whose every form is
	// missing is NXDOMAIN, the name given.
	if _, _, err := r.lookup(context.Background(), "_smsc._tcp.missing"); err == nil || !strings.Contains(err.Error(), `_smsc._tcp.missing`) ||
		!strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("lookup of a missing name = %v; want NXDOMAIN naming it", err)
	}
}

func TestResolverLostServerAskedOncePerLookup(t *testing.T) {
	// The first nameserver of resolv.conf is lost (it never answers), the
	// second works. One lookup is 1 + 2 queries a target without glue;
	// had each asked the lost server first and waited out its timeout, six
	// targets would take 13 timeouts (26 s with the default 2 s, near the
	// 30 s bound of a lookup): it is asked once, then the server that
	// answered is asked first.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var asked atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := silent.ReadFrom(buf); err != nil {
				return
			}
			asked.Add(1)
		}
	}()
	records := []string{}
	var want []string
	for i := range 6 {
		target := fmt.Sprintf("t%d.example.test.", i)
		records = append(records, fmt.Sprintf("%s 60 IN SRV 10 10 8443 %s", srvName, target),
			fmt.Sprintf("%s 60 IN A 127.0.0.%d", target, i+2))
		want = append(want, fmt.Sprintf("127.0.0.%d:8443", i+2))
	}
	z := dnstest.Start(t, records...)
	r := newResolver("")
	r.timeout = 50 * time.Millisecond
	servers := []string{silent.LocalAddr().String(), z.Addr}
	got, _, err := r.lookupAt(context.Background(), servers, srvName)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("lookup = %v, %v; want %v", got, err, want)
	}
	if q := z.UDP.Load(); q != 13 {
		t.Fatalf("the working server was asked %d queries, want 13", q)
	}
	// The lost server's reads are counted by its goroutine: wait for the
	// count to settle on what it got (it cannot get more once the lookup
	// has returned).
	polltest.Until(t, waitTimeout, "the lost server's queries counted", func() bool { return asked.Load() >= 1 })
	if n := asked.Load(); n != 1 {
		t.Fatalf("the lost server was asked %d times in one lookup, want once", n)
	}
}

func TestResolverTargetFailingForOneFamily(t *testing.T) {
	// A server that fails one type only (some load balancers drop or
	// SERVFAIL every AAAA query of their IPv4-only names): the other
	// type's answer counts, and the failed type keeps the target's last
	// addresses of that family.
	z := dnstest.Start(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.",
		"a.example.test. 60 IN A 127.0.0.2", "a.example.test. 60 IN AAAA 2001:db8::2")
	r := newResolver(z.Addr)
	if got, _, err := r.lookup(context.Background(), srvName); err != nil || len(got) != 2 {
		t.Fatalf("lookup = %v, %v; want both addresses", got, err)
	}
	z.SetRcodeFor("", dns.TypeAAAA, dns.RcodeServerFailure)
	z.Set(t, srvName+" 60 IN SRV 10 10 8443 a.example.test.", "a.example.test. 60 IN A 127.0.0.3")
	got, targetErr, err := r.lookup(context.Background(), srvName)
	if want := []string{"127.0.0.3:8443", "[2001:db8::2]:8443"}; err != nil || !reflect.DeepEqual(got, want) ||
		targetErr == nil || !strings.Contains(targetErr.Error(), "AAAA a.example.test.") {
		t.Fatalf("lookup = %v, %v, %v; want %v (the new A, the last AAAA) and the AAAA failure", got, targetErr, err, want)
	}
	// Broken from the first lookup: the A addresses alone.
	if got, targetErr, err := newResolver(z.Addr).lookup(context.Background(), srvName); err != nil || targetErr == nil ||
		!reflect.DeepEqual(got, []string{"127.0.0.3:8443"}) {
		t.Fatalf("first lookup = %v, %v, %v; want the A address and the AAAA failure", got, targetErr, err)
	}
}
