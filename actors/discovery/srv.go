package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// resolvConf is where the system's DNS servers are read from when no
// server is configured.
const resolvConf = "/etc/resolv.conf"

// ednsSize is the UDP payload size we announce: big enough for the SRV
// answer of a few dozen peers with their addresses, small enough not to be
// fragmented on common paths. Larger answers come truncated and are asked
// again over TCP.
const ednsSize = 1232

// errNoRecords is a lookup that found no address for the SRV name. It is
// treated as a failure (the last good list is kept): an empty answer is
// far more often a zone being reloaded or a typo than every peer gone.
var errNoRecords = errors.New("no addresses")

// resolver lists the addresses behind an SRV name with miekg/dns.
type resolver struct {
	// server is "host:port"; empty: the servers of resolvConf, in turn.
	server string
	// resolvConf is the file read when server is empty.
	resolvConf string
	// apiPort replaces a target's port 0.
	apiPort int
	// timeout bounds one exchange with one server.
	timeout time.Duration
	// known are the addresses of each target (lower case) of the last
	// lookup that got an SRV answer: those of a target whose own lookup
	// fails next time. One lookup runs at a time (the actor's rounds do).
	known map[string][]net.IP
}

// lookup returns the addresses ("ip:port", sorted, without duplicates) of
// every target of the SRV name. A failure of the SRV query (a server
// error, a timeout, NXDOMAIN) fails the whole lookup, so that a hiccup
// never shrinks the list. A failure to learn one target's addresses does
// not: a query of the target that fails (A or AAAA) gives the addresses of
// that family its last lookup found (none if it never had one: it is no
// peer yet), what the other query answered counts, so do the other
// targets, and the failure is returned as targetErr beside the addresses:
// one broken target must not freeze discovery, a site added never found
// and one removed never gone. Only when no target has an address is it a
// failure. A target that does not exist (NXDOMAIN) or has no address
// contributes none.
func (r *resolver) lookup(ctx context.Context, name string) (addrs []string, targetErr, err error) {
	servers, err := r.servers()
	if err != nil {
		return nil, nil, err
	}
	return r.lookupAt(ctx, servers, name)
}

// lookupAt is lookup against servers (asked in turn; the order changes:
// see query).
func (r *resolver) lookupAt(ctx context.Context, servers []string, name string) (addrs []string, targetErr, err error) {
	// The forms of the name are asked in turn until one answers SRV
	// records. One that fails (a search domain's server broken or slow)
	// moves on to the next, as the system resolver does: in Kubernetes an
	// absolute name written without its final dot is asked with every
	// search domain first, and a failure there must not hide the answer of
	// the name itself. When none answers records and one failed, the
	// lookup fails (the last list is kept): the failed form may hold them.
	var resp *dns.Msg
	var formErrs []error
	for _, n := range r.names(name) {
		got, qerr := r.query(ctx, servers, n, dns.TypeSRV)
		if qerr != nil {
			if ctx.Err() != nil {
				return nil, nil, qerr
			}
			formErrs = append(formErrs, qerr)
			continue
		}
		if resp = got; resp.Rcode == dns.RcodeSuccess && slices.ContainsFunc(resp.Answer, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeSRV }) {
			formErrs = nil
			break
		}
	}
	if len(formErrs) > 0 {
		return nil, nil, errors.Join(formErrs...)
	}
	if resp.Rcode == dns.RcodeNameError {
		return nil, nil, fmt.Errorf("srv %s: no such name (NXDOMAIN)", name)
	}
	known := map[string][]net.IP{}
	var failed []error
	for _, rr := range resp.Answer {
		srv, ok := rr.(*dns.SRV)
		if !ok || srv.Target == "." { // "." : the service is decidedly not available there
			continue
		}
		port := int(srv.Port)
		if port == 0 {
			port = r.apiPort
		}
		target := strings.ToLower(srv.Target)
		ips, looked := known[target]
		if !looked {
			ips = glue(resp.Extra, srv.Target)
		}
		if !looked && len(ips) == 0 {
			if ips, err = r.hostIPs(ctx, servers, srv.Target, r.known[target]); err != nil {
				if ctx.Err() != nil { // the lookup's time is up: every target would fail
					return nil, nil, err
				}
				failed = append(failed, err)
			}
		}
		known[target] = ips
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
		}
	}
	// The targets of this answer only: a target gone from it is forgotten.
	r.known = known
	targetErr = errors.Join(failed...)
	addrs = normalize(addrs)
	if len(addrs) == 0 {
		if targetErr != nil {
			return nil, nil, targetErr
		}
		return nil, nil, fmt.Errorf("srv %s: %w", name, errNoRecords)
	}
	return addrs, targetErr, nil
}

// glue returns the A and AAAA records for target in an additional section.
func glue(extra []dns.RR, target string) []net.IP {
	var ips []net.IP
	for _, rr := range extra {
		if ip := addressOf(rr); ip != nil && strings.EqualFold(rr.Header().Name, target) {
			ips = append(ips, ip)
		}
	}
	return ips
}

// addressOf is the address an A or AAAA record holds (nil for another).
func addressOf(rr dns.RR) net.IP {
	switch a := rr.(type) {
	case *dns.A:
		return a.A
	case *dns.AAAA:
		return a.AAAA
	}
	return nil
}

// hostIPs asks for the A and AAAA records of host. NXDOMAIN for one type
// is no record of that type, not the end: some servers answer so for the
// type a name lacks (AAAA of an IPv4-only name), and a name changed between
// the two queries does too; the other type's addresses are the target's.
// A type whose query fails (some servers SERVFAIL or drop every AAAA query)
// gives last, the host's addresses of that family from its last lookup, and
// the failure is returned with the addresses: the other type still counts.
func (r *resolver) hostIPs(ctx context.Context, servers []string, host string, last []net.IP) ([]net.IP, error) {
	var (
		ips  []net.IP
		errs []error
	)
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		resp, err := r.query(ctx, servers, host, t)
		if err != nil {
			errs = append(errs, err)
			for _, ip := range last {
				if (ip.To4() != nil) == (t == dns.TypeA) {
					ips = append(ips, ip)
				}
			}
			continue
		}
		for _, rr := range resp.Answer {
			if ip := addressOf(rr); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	return ips, errors.Join(errs...)
}

// names returns the names to ask for name, in order: name itself when it
// ends with a dot, else the forms the search list and ndots of resolvConf
// give, as the system resolver (and dig +search) tries them: in
// Kubernetes, "_smsc._tcp.switchboard" is the service of the pod's
// namespace. Without a readable resolvConf (a --dns-server given), name
// as is.
func (r *resolver) names(name string) []string {
	if dns.IsFqdn(name) {
		return []string{name}
	}
	cc, err := dns.ClientConfigFromFile(r.resolvConf)
	if err != nil {
		return []string{dns.Fqdn(name)}
	}
	return cc.NameList(name)
}

// servers returns the servers to ask, in order.
func (r *resolver) servers() ([]string, error) {
	if r.server != "" {
		return []string{r.server}, nil
	}
	cc, err := dns.ClientConfigFromFile(r.resolvConf)
	if err != nil {
		return nil, fmt.Errorf("read DNS servers: %w", err)
	}
	if len(cc.Servers) == 0 {
		return nil, fmt.Errorf("read DNS servers: %s lists no nameserver", r.resolvConf)
	}
	out := make([]string, len(cc.Servers))
	for i, s := range cc.Servers {
		out[i] = net.JoinHostPort(s, cc.Port)
	}
	return out, nil
}

// query asks the servers in turn until one answers NOERROR or NXDOMAIN
// (both are answers; anything else, like SERVFAIL or a timeout, moves on
// to the next server). A truncated UDP answer is asked again over TCP.
// The server that answered is moved to the front of servers: a lookup is
// one query a target and more, and a lost first server (resolv.conf's
// first nameserver down) would otherwise cost its timeout on every one of
// them, long enough with a few targets to fail the whole lookup.
func (r *resolver) query(ctx context.Context, servers []string, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = true
	m.SetEdns0(ednsSize, false)
	var errs []error
	for i, s := range servers {
		resp, err := r.exchange(ctx, "udp", s, m)
		if err == nil && resp.Truncated {
			resp, err = r.exchange(ctx, "tcp", s, m)
		}
		if err == nil && resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
			err = fmt.Errorf("answer %s", dns.RcodeToString[resp.Rcode])
		}
		if err == nil {
			copy(servers[1:i+1], servers[:i])
			servers[0] = s
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s %s from %s: %w", dns.TypeToString[qtype], name, s, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// exchange sends m to server over network once. Cancelling ctx closes the
// connection, so that a stopping actor does not wait for a slow server.
func (r *resolver) exchange(ctx context.Context, network, server string, m *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: r.timeout}
	co, err := c.DialContext(ctx, server)
	if err != nil {
		return nil, err
	}
	defer co.Close()
	stop := context.AfterFunc(ctx, func() { co.Close() })
	defer stop()
	resp, _, err := c.ExchangeWithConnContext(ctx, m, co)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// A socket error names our end too ("read udp 127.0.0.1:41577->...:
	// i/o timeout"), a new ephemeral port each exchange: the actor logs a
	// failure once per distinct error, and a DNS server down for an hour
	// would be a warning every poll. The server's address stays.
	var op *net.OpError
	if errors.As(err, &op) {
		op.Source = nil
	}
	return resp, err
}
