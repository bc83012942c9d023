package messages

import (
	"strings"
	"testing"
	"time"
)

func TestParseSMPPURL(t *testing.T) {
	def := SMPPOptions{SystemID: "acme", Addr: "smsc.example:2775", Bind: BindTransceiver, Window: DefaultSMPPWindow,
		Receipts: true, Long: LongUDH, SourceTON: -1, SourceNPI: -1, DestTON: -1, DestNPI: -1, EnquireLink: DefaultSMPPEnquireLink}
	with := func(f func(*SMPPOptions)) SMPPOptions { o := def; f(&o); return o }
	ok := []struct {
		url  string
		want SMPPOptions
	}{
		{"smpp://acme@smsc.example:2775", def},
		{"smpp://acme@smsc.example:2775/", def},
		{"smpps://acme@smsc.example:2775?tls_ca=/etc/ca.pem", with(func(o *SMPPOptions) { o.TLS, o.TLSCA = true, "/etc/ca.pem" })},
		{"smpp://acme@smsc.example:2775?bind=transmitter", with(func(o *SMPPOptions) { o.Bind, o.Receipts = BindTransmitter, false })},
		{"smpp://acme@smsc.example:2775?window=50&rate=12.5&long=payload&system_type=VMA&enquire_link=10s",
			with(func(o *SMPPOptions) {
				o.Window, o.Rate, o.Long, o.SystemType, o.EnquireLink = 50, 12.5, LongPayload, "VMA", 10*time.Second
			})},
		{"smpp://acme@smsc.example:2775?receipts=false&source_ton=5&source_npi=0&dest_ton=1&dest_npi=1",
			with(func(o *SMPPOptions) { o.Receipts, o.SourceTON, o.SourceNPI, o.DestTON, o.DestNPI = false, 5, 0, 1, 1 })},
		// CONTRACT.md's names: tps for the rate, tls for smpps://.
		{"smpp://acme@smsc.example:2775?bind=transceiver&window=10&tps=100&tls=false", with(func(o *SMPPOptions) { o.Rate = 100 })},
		{"smpp://acme@smsc.example:2775?tls=true&tls_ca=/etc/ca.pem", with(func(o *SMPPOptions) { o.TLS, o.TLSCA = true, "/etc/ca.pem" })},
		{"smpps://acme@smsc.example:2775?tls=true", with(func(o *SMPPOptions) { o.TLS = true })},
		{"smpp://acme@smsc.example:2775?tps=2.5&rate=2.5", with(func(o *SMPPOptions) { o.Rate = 2.5 })},
	}
	for _, c := range ok {
		got, err := ParseSMPPURL(c.url)
		if err != nil || got != c.want {
			t.Errorf("ParseSMPPURL(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
		}
	}
	bad := []struct{ url, want string }{
		{"http://acme@h:1", "scheme"},
		{"smpp://h:2775", "system_id"},
		{"smpp://waytoolongsystemid@h:2775", "system_id"},
		{"smpp://acme:pw@h:2775", "password goes in the frontend's secret"},
		{"smpp://acme@h", "host:port"},
		{"smpp://acme@h:0", "host:port"},
		{"smpp://acme@h:1/x", "path"},
		{"smpp://acme@h:1?speed=3", "unknown option"},
		{"smpp://acme@h:1?window=0", "window"},
		{"smpp://acme@h:1?window=1&window=2", "given 2 times"},
		{"smpp://acme@h:1?rate=-1", "rate"},
		{"smpp://acme@h:1?rate=NaN", "rate"},
		{"smpp://acme@h:1?bind=receiver", "bind"},
		{"smpp://acme@h:1?long=sar", "long"},
		{"smpp://acme@h:1?dest_ton=256", "dest_ton"},
		{"smpp://acme@h:1?enquire_link=1ms", "enquire_link"},
		{"smpp://acme@h:1?tls_ca=/x", "tls_ca"},
		{"smpp://acme@h:1?bind=transmitter&receipts=true", "transmitter bind receives no receipts"},
		{"smpp://acme@h:1?system_type=abcdefghijklm", "system_type"},
		{"smpp://acme@h:1?tps=-1", "tps"},
		{"smpp://acme@h:1?tps=10&rate=20", "tps and rate"},
		{"smpp://acme@h:1?tls=yes", "tls"},
		{"smpps://acme@h:1?tls=false", "smpps:// and tls=false"},
		{"smpp://acme@h:1?tls=false&tls_ca=/x", "tls_ca"},
	}
	for _, c := range bad {
		if _, err := ParseSMPPURL(c.url); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSMPPURL(%q): %v, want an error naming %q", c.url, err, c.want)
		}
	}
	// Every problem is reported.
	if _, err := ParseSMPPURL("smpp://h?window=x&rate=y"); err == nil || strings.Count(err.Error(), "\n") < 3 {
		t.Errorf("several problems: %v", err)
	}
}

func TestSMPPFrontendNormalizedAndValidate(t *testing.T) {
	f, err := Frontend{Name: "smsc", Mode: ModeSMPP, URL: "smpp://acme:pw123@smsc.example:2775?window=5"}.Normalized()
	if err != nil || f.URL != "smpp://acme@smsc.example:2775?window=5" || f.Secret != "pw123" {
		t.Fatalf("Normalized: %+v %v", f, err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := (Frontend{Name: "s", Mode: ModeSMPP, URL: "smpp://a:b@h:1", Secret: "c"}).Normalized(); err == nil {
		t.Fatal("a password in the URL and a secret were both taken")
	}
	for _, fe := range []Frontend{
		{Name: "s", Mode: ModeSMPP, URL: "smpp://a@h:1", Secret: "ninechars"},
		{Name: "s", Mode: ModeSMPP, URL: "smpp://a:pw@h:1"},
		{Name: "s", Mode: ModeSMPP, URL: ""},
		{Name: "s", Mode: ModePull, URL: "smpp://a@h:1"},
	} {
		if err := fe.Validate(); err == nil {
			t.Errorf("%+v was valid", fe)
		}
	}
	// Other modes are left as they are.
	hook := Frontend{Name: "h", Mode: ModeWebhook, URL: "https://u:p@x"}
	if got, err := hook.Normalized(); err != nil || got != hook {
		t.Fatalf("webhook normalized: %+v %v", got, err)
	}
}

// TestUnparsableSMPPURLHidesItsPassword: an smpp frontend's URL that
// url.Parse refuses (a letter in its port, a blank in its host) kept its
// bind password in the error (--frontend's start-up line, to stderr and
// the journal), which masks the password of a URL that parses.
func TestUnparsableSMPPURLHidesItsPassword(t *testing.T) {
	for _, raw := range []string{"smpp://acme:s3cret@smsc.example:27x5", "smpp://acme:s3cret@smsc example:2775"} {
		_, err := ParseSMPPURL(raw)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "is not a URL") {
			t.Errorf("ParseSMPPURL(%q): %v; want it refused as no URL, without the bind password", raw, err)
		}
		f := Frontend{Name: "smsc", Mode: ModeSMPP, URL: raw}
		if err := f.Validate(); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("an smpp frontend of %q: %v; want it refused without the bind password", raw, err)
		}
	}
}
