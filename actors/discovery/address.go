package discovery

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultAPIPort is the federation port: that of a static peer given
// without one, and by default that of an SRV target whose record says
// port 0 and the port a node listens on.
const DefaultAPIPort = 8443

// dnsPort is the port of a DNS server given without one.
const dnsPort = 53

// ParsePeers parses a list of peers: "host[:port],host[:port],...".
// An entry without a port gets defaultPort; an IPv6 address with a port is
// written in brackets ("[2001:db8::1]:8443"), without one it may be bare.
// Blanks around entries are ignored; an empty value is no peers. It returns
// the addresses as "host:port" in the order given, without duplicates. The
// error describes the first bad entry but does not name the flag: the
// caller does.
func ParsePeers(s string, defaultPort int) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	seen := map[string]bool{}
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return nil, fmt.Errorf("entry %d is empty (want host:port,host:port)", i+1)
		}
		a, err := parseHostPort(e, defaultPort)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

// ParseDNSServer parses a DNS server's address: "host[:port]", port 53
// when omitted.
func ParseDNSServer(s string) (string, error) {
	return parseHostPort(strings.TrimSpace(s), dnsPort)
}

// parseHostPort returns s as "host:port", with defaultPort when s has no
// port (defaultPort 0: the port is required).
func parseHostPort(s string, defaultPort int) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a host name, an IPv4 address, a bare or bracketed IPv6.
		// Brackets hold an IPv6 address and are closed: "[2001:db8::1:8443"
		// (a "]" forgotten) is a typo to refuse, not the address
		// 2001:db8::1:8443 on the default port.
		bare := s
		if strings.HasPrefix(s, "[") || strings.HasSuffix(s, "]") {
			inner, opened := strings.CutPrefix(s, "[")
			inner, closed := strings.CutSuffix(inner, "]")
			if a, err := netip.ParseAddr(inner); !opened || !closed || err != nil || !a.Is6() {
				return "", fmt.Errorf("%q is not host:port", s)
			}
			bare = inner
		}
		_, ipErr := netip.ParseAddr(bare)
		if defaultPort == 0 || (strings.Contains(s, ":") && ipErr != nil) {
			return "", fmt.Errorf("%q is not host:port", s)
		}
		host, port = bare, strconv.Itoa(defaultPort)
	}
	if !ValidHost(host) {
		return "", fmt.Errorf("%q: %q is not a host name or IP address", s, host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%q: port %q is not a number in 1-65535", s, port)
	}
	return net.JoinHostPort(host, port), nil
}

// ValidHost reports whether h is an IP address or a DNS host name: labels
// of 1-63 letters, digits, '-' or '_' (not starting or ending with '-'),
// at most 253 characters, an optional final dot.
func ValidHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// SRVNameError reports why name is not an SRV name to look peers up by:
// _service._proto.domain (RFC 2782), e.g. _smsc._tcp.example.com, each
// label of ValidHost's letters, digits, '-' and '_', an optional final
// dot. A name that cannot be one would only fail each lookup (NXDOMAIN,
// logged every poll) and leave the node without peers.
func SRVNameError(name string) error {
	if _, err := netip.ParseAddr(name); err == nil || !ValidHost(name) {
		return fmt.Errorf("%q is not a DNS name", name)
	}
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	if len(labels) < 3 || len(labels[0]) < 2 || labels[0][0] != '_' || len(labels[1]) < 2 || labels[1][0] != '_' {
		return fmt.Errorf("%q is not an SRV name _service._proto.domain, e.g. _smsc._tcp.example.com", name)
	}
	return nil
}
