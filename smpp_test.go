package switchboard_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// The SMPP listener through the embedding API, under -race: TLS with the
// node's certificate, a submit answered with the id of the stored message,
// its receipt once a pull frontend acked it, and a graceful stop that
// unbinds the ESME.
func TestSMPPListenTLS(t *testing.T) {
	cfg := testConfig(t)
	cfg.SMPPListen, cfg.SMPPTLS = "127.0.0.1:0", true
	h := startNode(t, cfg)
	h.pullFrontend("pf", "44")

	pem, err := os.ReadFile(filepath.Join(cfg.DataDir, "selfsigned.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	nc, err := tls.Dial("tcp", h.node.SMPPAddr(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatalf("TLS to the SMPP listener: %v", err)
	}
	receipts := make(chan smpp.PDU, 1)
	sc := smpp.DefaultSessionConfig(smpp.RoleESME)
	sc.Handler = func(s *smpp.Session, req smpp.PDU) {
		_ = s.Reply(req, smpp.StatusOK, &smpp.SMResp{})
		receipts <- req
	}
	s, err := smpp.NewSession(nc, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A node without credentials lets every bind in, as its API does.
	if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: "app", Password: "any"}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
		Dest: smpp.Address{Addr: "447700900001"}, RegisteredDelivery: smpp.RegisteredFinal, DataCoding: smpp.DCUCS2,
		ShortMessage: []byte{0x04, 0x1F, 0x04, 0x40}}})
	if err != nil || resp.Status != smpp.StatusOK {
		t.Fatalf("submit_sm: %v %s", err, resp.Status)
	}
	id := resp.Body.(*smpp.SMResp).MessageID
	m := h.message(id)
	if m.Body != "Пр" || m.DataCoding != messages.CodingUCS2 || m.SourceMSISDN != "Shop" || m.State != messages.StatePending {
		t.Fatalf("stored %+v", m)
	}
	out := h.poll("pf", 10, 5000, 30000)
	if len(out) != 1 || out[0].ID != id {
		t.Fatalf("polled %+v", out)
	}
	h.ack("pf", messages.DeliveryResult{ID: id, Status: messages.Delivered})
	select {
	case p := <-receipts:
		sm := p.Body.(*smpp.SM)
		if !strings.HasPrefix(string(sm.ShortMessage), "id:"+id+" ") || !strings.Contains(string(sm.ShortMessage), "stat:DELIVRD") {
			t.Errorf("receipt %q", sm.ShortMessage)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no receipt")
	}
	// query_sm answers the message's state now that it is final.
	q, err := s.Request(ctx, smpp.PDU{Command: smpp.QuerySM, Body: &smpp.Query{MessageID: id, Source: smpp.Address{Addr: "Shop"}}})
	if err != nil || q.Status != smpp.StatusOK || q.Body.(*smpp.QueryResp).MessageState != smpp.StateDelivered || q.Body.(*smpp.QueryResp).FinalDate == "" {
		t.Errorf("query_sm: %+v %v", q, err)
	}
	if q, err := s.Request(ctx, smpp.PDU{Command: smpp.QuerySM, Body: &smpp.Query{MessageID: "nope"}}); err != nil || q.Status != smpp.StatusQueryFailed {
		t.Errorf("query_sm of an unknown id: %+v %v", q, err)
	}
	// data_sm: the content in message_payload, answered with the id too.
	d, err := s.Request(ctx, smpp.PDU{Command: smpp.DataSM, Body: &smpp.DataSMBody{Source: smpp.Address{Addr: "Shop"},
		Dest: smpp.Address{Addr: "447700900002"}, TLVs: smpp.TLVs{{Tag: smpp.TagMessagePayload, Value: []byte("by data sm")}}}})
	if err != nil || d.Status != smpp.StatusOK || d.Command != smpp.DataSMResp {
		t.Fatalf("data_sm: %+v %v", d, err)
	}
	if m := h.message(d.Body.(*smpp.SMResp).MessageID); m.Body != "by data sm" || m.DestinationMSISDN != "447700900002" {
		t.Errorf("data_sm stored %+v", m)
	}
	h.stop()
	select {
	case <-s.Done():
		if s.Err() != smpp.ErrUnbound {
			t.Errorf("the session ended with %v, want the node's unbind", s.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session outlived the node")
	}
}

// TestQuerySMAnswersOnlyTheAccountsOwn: on a node with credentials an SMPP
// account's query_sm answers about the messages it submitted, and about
// no other: one without a submitter (the embedding API's, a peer's
// forward) was answered to any account, while the HTTP API gives a client
// 404 for it.
func TestQuerySMAnswersOnlyTheAccountsOwn(t *testing.T) {
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	rootTok, rootHash := auth.NewToken()
	pw, pwHash := auth.NewSMPPPassword()
	shopTok, shopHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{
		{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash},
		{Name: "shop", Role: messages.RoleClient, TokenHash: shopHash},
		{Name: "esme1", Role: messages.RoleClient, TokenHash: pwHash, SMPP: true},
	}})
	h := startNode(t, cfg)
	h.token = rootTok
	h.pullFrontend("pf", "44")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := h.node.Submit(ctx, messages.Submission{ID: "internal-1", SourceMSISDN: "Bank", DestinationMSISDN: "447700900001", Body: "otp 1234"}); err != nil {
		t.Fatal(err)
	}
	h.as(shopTok).apiError(404, messages.CodeNotFound, "GET", "/api/messages/internal-1", nil)

	s := esmeSession(t, h)
	defer s.Close()
	if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: "esme1", Password: pw}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
		Dest: smpp.Address{Addr: "447700900002"}, ShortMessage: []byte("hi")}})
	if err != nil || resp.Status != smpp.StatusOK {
		t.Fatalf("submit_sm: %v %s", err, resp.Status)
	}
	own := resp.Body.(*smpp.SMResp).MessageID
	for id, want := range map[string]smpp.Status{own: smpp.StatusOK, "internal-1": smpp.StatusQueryFailed} {
		q, err := s.Request(ctx, smpp.PDU{Command: smpp.QuerySM, Body: &smpp.Query{MessageID: id}})
		if err != nil || q.Status != want {
			t.Errorf("query_sm by esme1 of %s: %v %+v, want %s", id, err, q, want)
		}
	}
}

// SMPPTLS without SMPPListen is a configuration error.
func TestSMPPConfig(t *testing.T) {
	cfg := switchboard.DefaultConfig()
	cfg.SMPPTLS = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "SMPPTLS: needs SMPPListen") {
		t.Errorf("Validate: %v", err)
	}
	cfg.SMPPListen, cfg.Listen = ":8443", ":8443"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "SMPPListen: ") {
		t.Errorf("Validate: %v", err)
	}
}

// TestSMPPAccountsOfTheFlags: an account of --smpp-account (SMPPAccounts)
// binds an ESME, held in memory beside the credentials (none stored); a
// wrong password is refused, and the account is no API token. Before,
// the flag of the contract was unknown to run.
func TestSMPPAccountsOfTheFlags(t *testing.T) {
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	cfg.APIToken = "root-token-0123456789"
	cfg.SMPPAccounts = []switchboard.SMPPAccount{{SystemID: "esme9", Password: "pw123456"}}
	h := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bind := func(password string) (smpp.Status, error) {
		s := esmeSession(t, h)
		defer s.Close()
		resp, err := s.Request(ctx, smpp.PDU{Command: smpp.BindTransceiver, Body: &smpp.Bind{SystemID: "esme9", Password: password}})
		if err != nil {
			return 0, err
		}
		return resp.Status, nil
	}
	if st, err := bind("pw123456"); err != nil || st != smpp.StatusOK {
		t.Fatalf("bind with the flag's account: %v %s", err, st)
	}
	if st, err := bind("wrong"); err != nil || st != smpp.StatusInvalidPassword {
		t.Fatalf("bind with a wrong password: %v %s, want %s", err, st, smpp.StatusInvalidPassword)
	}
	h.as("pw123456").apiError(401, messages.CodeUnauthorized, "GET", "/api/status", nil)
	if rows, err := h.node.Store().Credentials(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("stored credentials %v, %v: want none", rows, err)
	}
}

// TestSMPPAccountsConfig: each account is a valid SMPP system_id and
// password, given once.
func TestSMPPAccountsConfig(t *testing.T) {
	for _, tc := range []struct {
		acc  []switchboard.SMPPAccount
		want string
	}{
		{[]switchboard.SMPPAccount{{SystemID: "bad name", Password: "pw"}}, "SMPPAccounts: system_id \"bad name\" is not a valid name"},
		{[]switchboard.SMPPAccount{{SystemID: "a-very-long-system-id", Password: "pw"}}, "at most 15 characters"},
		{[]switchboard.SMPPAccount{{SystemID: "api-token", Password: "pw"}}, "is the --api-token credential's"},
		{[]switchboard.SMPPAccount{{SystemID: "esme", Password: ""}}, "1-8 printable ASCII characters"},
		{[]switchboard.SMPPAccount{{SystemID: "esme", Password: "toolongpw"}}, "1-8 printable ASCII characters"},
		{[]switchboard.SMPPAccount{{SystemID: "esme", Password: "a"}, {SystemID: "esme", Password: "b"}}, "\"esme\" given twice"},
	} {
		cfg := switchboard.DefaultConfig()
		cfg.SMPPAccounts = tc.acc
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%v): %v, want %q", tc.acc, err, tc.want)
		}
	}
}

// TestSMPPAccountsOfTheFlagsAreNotTheFiles: beside a credentials file, an
// account of the flags is neither recorded in the audit trail as the
// file's nor kept in the file's record of what it last saw.
func TestSMPPAccountsOfTheFlagsAreNotTheFiles(t *testing.T) {
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	cfg.SMPPAccounts = []switchboard.SMPPAccount{{SystemID: "esme9", Password: "pw123456"}}
	rootTok, rootHash := auth.NewToken()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash}}})
	h := startNode(t, cfg)
	h.token = rootTok
	var trail struct{ Entries []messages.AuditEntry }
	polltest.Eventually(t, 5*time.Second, func() error {
		h.must(200, "GET", "/api/audit?actor=credentials-file", nil, &trail)
		if len(trail.Entries) != 1 || trail.Entries[0].Target != "root" {
			return fmt.Errorf("the audit trail of the file: %+v, want root's addition alone", trail.Entries)
		}
		return nil
	})
	data, err := os.ReadFile(filepath.Join(cfg.DataDir, "credentials-seen.json"))
	if err != nil || !strings.Contains(string(data), `"root"`) || strings.Contains(string(data), "esme9") {
		t.Fatalf("credentials-seen.json %s (%v): want root's, not esme9", data, err)
	}
}

// esmeSession is an ESME's session over plain TCP to h's SMPP listener,
// not bound yet.
func esmeSession(t *testing.T, h *harness) *smpp.Session {
	t.Helper()
	nc, err := net.Dial("tcp", h.node.SMPPAddr())
	if err != nil {
		t.Fatal(err)
	}
	s, err := smpp.NewSession(nc, smpp.DefaultSessionConfig(smpp.RoleESME))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSMPPTimesTheNodeRefuses: a validity_period or schedule_delivery_time
// that reads well but that the node refuses against its clock and
// --message-validity is answered ESME_RINVEXPIRY or ESME_RINVSCHED (SMPP
// v3.4 table 5-2), not the generic ESME_RSUBMITFAIL, which does not tell
// the ESME which of its times to change; nothing is stored.
func TestSMPPTimesTheNodeRefuses(t *testing.T) {
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	cfg.MessageValidity = time.Hour
	cfg.APIToken = "root-token-0123456789"
	cfg.SMPPAccounts = []switchboard.SMPPAccount{{SystemID: "esme9", Password: "pw123456"}}
	h := startNode(t, cfg)
	h.token = cfg.APIToken
	h.pullFrontend("pf", "44")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := esmeSession(t, h)
	defer s.Close()
	if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: "esme9", Password: "pw123456"}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	passed := time.Now().Add(-time.Hour).UTC().Format("060102150405") + "000+"
	for _, c := range []struct {
		name               string
		validity, schedule string
		want               smpp.Status
	}{
		{"a validity that has passed", passed, "", smpp.StatusInvalidExpiry},
		{"a validity past --message-validity (1h)", "000000020000000R", "", smpp.StatusInvalidExpiry},
		{"a schedule past --message-validity", "", "000000020000000R", smpp.StatusInvalidSched},
		{"a schedule after the validity", "000000003000000R", "000000004000000R", smpp.StatusInvalidSched},
		{"both within it", "000000004000000R", "000000003000000R", smpp.StatusOK},
	} {
		resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
			Dest: smpp.Address{Addr: "447700900002"}, ShortMessage: []byte("hi"), ValidityPeriod: c.validity, ScheduleDeliveryTime: c.schedule}})
		if err != nil || resp.Status != c.want {
			t.Errorf("%s: %v %s, want %s", c.name, err, resp.Status, c.want)
		}
	}
	if n := h.status().Counts[string(messages.StatePending)]; n != 1 {
		t.Errorf("%d messages pending, want the one submit taken", n)
	}
}

// TestRevokedSMPPAccountLosesItsBoundSessions: an SMPP account revoked
// (or given a new password) while an ESME is bound as it is unbound from
// the node within a second, as a revoked API token stops at once: its
// session went on submitting (and receiving receipts) until the ESME
// unbound by itself, days later for an ESME that keeps its link up. An
// account whose submit rate changes keeps its session, at its new rate.
func TestRevokedSMPPAccountLosesItsBoundSessions(t *testing.T) {
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	cfg.Credentials = filepath.Join(cfg.DataDir, "credentials.json")
	rootTok, rootHash := auth.NewToken()
	pw1, hash1 := auth.NewSMPPPassword()
	pw2, hash2 := auth.NewSMPPPassword()
	root := messages.Credential{Name: "root", Role: messages.RoleAdmin, TokenHash: rootHash}
	esme := func(name, hash string, rate float64) messages.Credential {
		return messages.Credential{Name: name, Role: messages.RoleClient, TokenHash: hash, SMPP: true, SubmitRate: rate}
	}
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{root, esme("esme1", hash1, 0), esme("esme2", hash2, 0)}})
	h := startNode(t, cfg)
	h.token = rootTok
	h.pullFrontend("pf", "44")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bound := func(name, pw string) *smpp.Session {
		s := esmeSession(t, h)
		t.Cleanup(func() { s.Close() })
		if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: name, Password: pw}); err != nil {
			t.Fatalf("bind %s: %v", name, err)
		}
		return s
	}
	submit := func(s *smpp.Session) smpp.Status {
		resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
			Dest: smpp.Address{Addr: "447700900001"}, ShortMessage: []byte("hi")}})
		if err != nil {
			return smpp.StatusSystemError
		}
		return resp.Status
	}
	s1, s2 := bound("esme1", pw1), bound("esme2", pw2)
	if st1, st2 := submit(s1), submit(s2); st1 != smpp.StatusOK || st2 != smpp.StatusOK {
		t.Fatalf("submits before the change: %s %s", st1, st2)
	}

	// esme1 revoked, esme2 given a submit rate of 1 a second.
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{root, esme("esme2", hash2, 1)}})
	polltest.Eventually(t, 10*time.Second, func() error {
		select {
		case <-s1.Done():
			return nil
		default:
			return fmt.Errorf("the revoked account's session is still bound (a submit on it: %s)", submit(s1))
		}
	})
	polltest.Eventually(t, 10*time.Second, func() error {
		if a, b := submit(s2), submit(s2); b != smpp.StatusThrottled {
			return fmt.Errorf("two submits at once on esme2's session: %s %s, want the second %s at its new rate", a, b, smpp.StatusThrottled)
		}
		return nil
	})
	select {
	case <-s2.Done():
		t.Fatalf("esme2's session ended (%v): a change of its rate is no revocation", s2.Err())
	default:
	}

	// esme2's password changed: its session bound with the old one ends.
	_, hash3 := auth.NewSMPPPassword()
	writeCredentials(t, cfg.Credentials, auth.File{Credentials: []messages.Credential{root, esme("esme2", hash3, 1)}})
	polltest.Eventually(t, 10*time.Second, func() error {
		select {
		case <-s2.Done():
			return nil
		default:
			return errors.New("the session bound with esme2's old password is still bound")
		}
	})
}
