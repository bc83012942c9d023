package discovery

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string // substring of the error; "" = no error
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "a.example.com", want: []string{"a.example.com:8443"}},
		{in: "a.example.com:9000", want: []string{"a.example.com:9000"}},
		{in: " a:1 , b ", want: []string{"a:1", "b:8443"}},
		{in: "10.0.0.1,10.0.0.1:8443,10.0.0.2:1", want: []string{"10.0.0.1:8443", "10.0.0.2:1"}},
		{in: "[2001:db8::1]:9000", want: []string{"[2001:db8::1]:9000"}},
		{in: "2001:db8::1", want: []string{"[2001:db8::1]:8443"}},
		{in: "[2001:db8::1]", want: []string{"[2001:db8::1]:8443"}},
		{in: "node_1.svc.local", want: []string{"node_1.svc.local:8443"}},
		{in: "a,,b", err: "entry 2 is empty"},
		{in: "a,", err: "entry 2 is empty"},
		{in: "a:0", err: `entry 1: "a:0": port "0" is not a number in 1-65535`},
		{in: "a:65536", err: "not a number in 1-65535"},
		{in: "a:http", err: `port "http"`},
		{in: "a:", err: `port ""`},
		{in: "b,a:b:c", err: `entry 2: "a:b:c" is not host:port`},
		{in: ":8443", err: `"" is not a host name or IP address`},
		{in: "-bad-.example", err: "is not a host name"},
		{in: "a b:1", err: "is not a host name"},
		{in: "https://a:1", err: "is not host:port"},
		// Brackets hold an IPv6 address, closed: a missing "]" is a typo
		// (the port would have been taken as the address's last group).
		{in: "[2001:db8::1:8443", err: `"[2001:db8::1:8443" is not host:port`},
		{in: "2001:db8::1]", err: "is not host:port"},
		{in: "[a.example]", err: `"[a.example]" is not host:port`},
		{in: "[10.0.0.1]", err: "is not host:port"},
	}
	for _, tc := range cases {
		got, err := ParsePeers(tc.in, DefaultAPIPort)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParsePeers(%q): %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePeers(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && !reflect.DeepEqual(got, tc.want):
			t.Errorf("ParsePeers(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParsePeersDefaultPort(t *testing.T) {
	got, err := ParsePeers("a,b:1", 9443)
	if err != nil || !reflect.DeepEqual(got, []string{"a:9443", "b:1"}) {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestParseDNSServer(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.53": "10.0.0.53:53", "10.0.0.53:5353": "10.0.0.53:5353", "::1": "[::1]:53",
		"[::1]:5353": "[::1]:5353", "ns.example": "ns.example:53",
	} {
		if got, err := ParseDNSServer(in); err != nil || got != want {
			t.Errorf("ParseDNSServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a:b:c", "ns:99999"} {
		if got, err := ParseDNSServer(in); err == nil {
			t.Errorf("ParseDNSServer(%q) = %q, want an error", in, got)
		}
	}
}
