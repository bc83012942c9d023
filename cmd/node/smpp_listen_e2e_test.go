package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/nodetest"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
	"github.com/switchboard-dev/switchboard/smpp/smpptest"
)

// The SMPP listener, end to end: the real binary with --smpp-listen and
// an SMPP account of its credentials file; Perl's Net::SMPP as the ESME
// (a peer written by others), Go ESMEs of package smpp for the bad input,
// the receipts that wait for a receiver and the kill -9.

const smppAdminToken = "smpp-e2e-admin-token-0123456789"

// bearer adds the admin token to every API call.
type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+smppAdminToken)
	return b.rt.RoundTrip(r)
}

var printedSMPP = regexp.MustCompile(`(?m)^SMPP account: system_id (\S+), password: (\S{8})$`)

// smppNode is a node with --smpp-listen, an SMPP account esme1 (its
// password returned), webhook frontends ok (accepts) and no (refuses)
// routed by 33 and 34, and the admin token on the API.
func smppNode(t *testing.T, extra ...string) (*e2eNode, string, string) {
	t.Helper()
	smpptest.NeedNetSMPP(t)
	bin := nodetest.Binary(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials.json")
	code, out, errOut := runMain("credentials", "add", "esme1", "--smpp", "--credentials", creds)
	m := printedSMPP.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] != "esme1" {
		t.Fatalf("credentials add --smpp: exit %d, %q %q", code, out, errOut)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ok") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(hook.Close)
	addr, smppAddr := nodetest.FreeAddr(t), nodetest.FreeAddr(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	t.Cleanup(tr.CloseIdleConnections)
	n := newE2ENode(t, bin, addr, &http.Client{Transport: bearer{tr}, Timeout: 30 * time.Second}, append([]string{"run", "--name", "smsc", "--instance-id", "smsc-0", "--data-dir", filepath.Join(dir, "data"),
		"--listen", addr, "--metrics-listen", "", "--smpp-listen", smppAddr,
		"--api-token", smppAdminToken, "--credentials", creds,
		"--frontend", "ok=" + hook.URL + "/ok", "--frontend", "no=" + hook.URL + "/no", "--route", "33=ok", "--route", "34=no",
		"--log-format", "json"}, extra...)...)
	t.Cleanup(func() {
		if n.Started() {
			n.End()
		}
		if t.Failed() {
			for i, l := range n.RunLogs() {
				t.Logf("--- logs of run %d ---\n%s", i+1, tail(l, 6000))
			}
		}
	})
	n.Start()
	return n, smppAddr, m[2]
}

func TestSMPPListen(t *testing.T) {
	n, addr, password := smppNode(t)
	host, port, _ := net.SplitHostPort(addr)

	t.Run("NetSMPPESME", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "perl", filepath.Join("testdata", "smpp_esme.pl"), host, port, "esme1", password, "4")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("smpp_esme.pl: %v\n%s\n%s", err, out, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if lines[0] != "bind status=0 system_id=smsc" || lines[len(lines)-1] != "unbind_resp status=0" {
			t.Fatalf("script printed\n%s", out)
		}
		ids := map[string]string{}
		var receipts []string
		for _, l := range lines[1 : len(lines)-1] {
			var name, id string
			var status int
			if _, err := fmt.Sscanf(l, "submit_sm_resp %s status=%d message_id=%s", &name, &status, &id); err == nil || strings.HasPrefix(l, "submit_sm_resp") {
				if name == "noroute" {
					if status != int(smpp.StatusInvalidDstAddr) {
						t.Errorf("a destination without a route: %s", l)
					}
					continue
				}
				if status != 0 || id == "" {
					t.Errorf("refused: %s", l)
				}
				ids[name] = id
				continue
			}
			receipts = append(receipts, l)
		}
		if len(ids) != 8 || ids["long1"] != ids["long2"] || ids["long1"] != ids["long3"] || ids["sar1"] != ids["sar2"] || ids["gsm7"] == ids["ucs2"] {
			t.Fatalf("message ids %v: the parts of a message share its id, messages have their own", ids)
		}
		// One receipt for each message that asked (its parts once).
		want := map[string]string{ids["gsm7"]: "DELIVRD", ids["ucs2"]: "DELIVRD", ids["long1"]: "DELIVRD", ids["refused"]: "REJECTD"}
		sort.Strings(receipts)
		for _, r := range receipts {
			var state int
			var src, dst, id string
			if _, err := fmt.Sscanf(r, "deliver_sm esm_class=4 source=%s dest=PerlTest receipted=%s state=%d", &src, &id, &state); err != nil {
				t.Errorf("receipt line %q: %v", r, err)
				continue
			}
			stat, ok := want[id]
			if !ok || !strings.Contains(r, " sm=id:"+id+" ") || !strings.Contains(r, "stat:"+stat) {
				t.Errorf("receipt %q: want one of %v", r, want)
			}
			delete(want, id)
			_ = dst
		}
		if len(want) != 0 {
			t.Errorf("no receipt for %v", want)
		}
		long := make([]byte, 400)
		for i := range long {
			long[i] = byte('A' + i%26)
		}
		for name, w := range map[string]messages.Message{
			"gsm7":    {Body: "Hi @£€", Options: messages.Options{DataCoding: messages.CodingGSM7}},
			"ucs2":    {Body: "Привет", Options: messages.Options{DataCoding: messages.CodingUCS2}},
			"long1":   {Body: string(long), Options: messages.Options{DataCoding: messages.CodingGSM7}},
			"sar1":    {Body: "first half, second half", Options: messages.Options{DataCoding: messages.CodingGSM7}},
			"refused": {Body: "no thanks", State: messages.StateFailed},
		} {
			var m messages.Message
			if st, err := n.Call("GET", "/api/messages/"+ids[name], nil, &m); err != nil || st != 200 {
				t.Fatalf("%s: GET %d %v", name, st, err)
			}
			if m.Body != w.Body || (w.DataCoding != "" && m.DataCoding != w.DataCoding) || m.SourceMSISDN != "PerlTest" || m.SubmittedBy != "esme1" ||
				(w.State != "" && m.State != w.State) {
				t.Errorf("%s stored as %q %s from %s by %s in %s", name, m.Body, m.DataCoding, m.SourceMSISDN, m.SubmittedBy, m.State)
			}
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		before := storedCount(t, n)
		for _, c := range badSMPPCases(password) {
			t.Run(c.name, func(t *testing.T) {
				conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
				for _, b := range c.send {
					if _, err := conn.Write(b); err != nil {
						t.Fatal(err)
					}
				}
				for i, w := range c.want {
					p, err := smpp.ReadPDU(conn, 0)
					if err != nil {
						t.Fatalf("answer %d: %v", i, err)
					}
					if p.Command != w.cmd || p.Status != w.st {
						t.Fatalf("answer %d: %s %s, want %s %s", i, p.Command, p.Status, w.cmd, w.st)
					}
				}
				if c.closes {
					if p, err := smpp.ReadPDU(conn, 0); err == nil {
						t.Errorf("the connection stays open: %s %s", p.Command, p.Status)
					}
				}
			})
		}
		if after := storedCount(t, n); after != before {
			t.Errorf("bad input stored %d messages", after-before)
		}
	})

	t.Run("ReceiptWaitsForAReceiver", func(t *testing.T) {
		tx := dialESME(t, addr, smpp.BindTransmitter, "esme1", password, nil)
		id := submitOne(t, tx, "33600000009", smpp.RegisteredFinal)
		polltest.Until(t, 30*time.Second, "the condition", func() bool {
			var m messages.Message
			st, err := n.Call("GET", "/api/messages/"+id, nil, &m)
			return err == nil && st == 200 && m.State == messages.StateDelivered
		})
		// Delivered, with nobody bound to receive the receipt: it waits in
		// the outbox until a receiver binds.
		got := make(chan smpp.PDU, 4)
		dialESME(t, addr, smpp.BindReceiver, "esme1", password, got)
		select {
		case p := <-got:
			sm := p.Body.(*smpp.SM)
			r, err := smpp.ParseReceipt(string(sm.ShortMessage))
			if err != nil || r.ID != id || r.Stat != "DELIVRD" || sm.ESMClass != smpp.ESMClassReceipt {
				t.Errorf("receipt %q, %v; want DELIVRD of %s", sm.ShortMessage, err, id)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no receipt after the receiver bound")
		}
	})
}

// storedCount is how many messages the node holds.
func storedCount(t *testing.T, n *e2eNode) int64 {
	t.Helper()
	var st struct{ Counts map[string]int64 }
	if code, err := n.Call("GET", "/api/status", nil, &st); err != nil || code != 200 {
		t.Fatalf("status: %d %v", code, err)
	}
	var sum int64
	for _, v := range st.Counts {
		sum += v
	}
	return sum
}

type answer struct {
	cmd smpp.CommandID
	st  smpp.Status
}

type badCase struct {
	name   string
	send   [][]byte
	want   []answer
	closes bool
}

func pdu(p smpp.PDU) []byte {
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func bindPDU(cmd smpp.CommandID, id, pw string) []byte {
	return pdu(smpp.PDU{Command: cmd, Seq: 1, Body: &smpp.Bind{SystemID: id, Password: pw, InterfaceVersion: smpp.InterfaceVersion34}})
}

func submitPDU(seq uint32, sm smpp.SM) []byte {
	if sm.Source.Addr == "" {
		sm.Source.Addr = "GoTest"
	}
	return pdu(smpp.PDU{Command: smpp.SubmitSM, Seq: seq, Body: &sm})
}

// badSMPPCases are the refusals of the listener: each a clear
// command_status or generic_nack, none storing anything.
func badSMPPCases(password string) []badCase {
	trx := bindPDU(smpp.BindTransceiver, "esme1", password)
	ok := answer{smpp.BindTransceiverResp, smpp.StatusOK}
	header := func(length, cmd, status, seq uint32) []byte {
		b := make([]byte, 16)
		binary.BigEndian.PutUint32(b, length)
		binary.BigEndian.PutUint32(b[4:], cmd)
		binary.BigEndian.PutUint32(b[8:], status)
		binary.BigEndian.PutUint32(b[12:], seq)
		return b
	}
	// A submit_sm whose sm_length runs past the PDU.
	cut := submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, ShortMessage: []byte("hello")})
	cut = cut[:len(cut)-3]
	binary.BigEndian.PutUint32(cut, uint32(len(cut)))
	return []badCase{
		{"WrongPassword", [][]byte{bindPDU(smpp.BindTransceiver, "esme1", "wrong")}, []answer{{smpp.BindTransceiverResp, smpp.StatusInvalidPassword}}, true},
		{"UnknownSystemID", [][]byte{bindPDU(smpp.BindTransmitter, "nobody", password)}, []answer{{smpp.BindTransmitterResp, smpp.StatusInvalidSystemID}}, true},
		{"APICredentialIsNoAccount", [][]byte{bindPDU(smpp.BindReceiver, "api-token", "x")}, []answer{{smpp.BindReceiverResp, smpp.StatusInvalidSystemID}}, true},
		{"SubmitBeforeBind", [][]byte{submitPDU(1, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, ShortMessage: []byte("x")})},
			[]answer{{smpp.SubmitSMResp, smpp.StatusInvalidBindState}}, false},
		{"SubmitOnAReceiver", [][]byte{bindPDU(smpp.BindReceiver, "esme1", password),
			submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, ShortMessage: []byte("x")})},
			[]answer{{smpp.BindReceiverResp, smpp.StatusOK}, {smpp.SubmitSMResp, smpp.StatusInvalidBindState}}, false},
		{"SecondBind", [][]byte{trx, bindPDU(smpp.BindTransmitter, "esme1", password)},
			[]answer{ok, {smpp.BindTransmitterResp, smpp.StatusAlreadyBound}}, false},
		{"DeliverSMFromAnESME", [][]byte{trx, pdu(smpp.PDU{Command: smpp.DeliverSM, Seq: 2, Body: &smpp.SM{Dest: smpp.Address{Addr: "1"}}})},
			[]answer{ok, {smpp.DeliverSMResp, smpp.StatusInvalidBindState}}, false},
		{"UnknownCommand", [][]byte{trx, header(16, 0x00000077, 0, 2)}, []answer{ok, {smpp.GenericNack, smpp.StatusInvalidCmdID}}, false},
		{"ShortMessagePastThePDU", [][]byte{trx, cut}, []answer{ok, {smpp.SubmitSMResp, smpp.StatusInvalidMsgLen}}, false},
		{"OversizeLength", [][]byte{trx, header(0x7FFFFFF0, uint32(smpp.SubmitSM), 0, 2)}, []answer{ok, {smpp.GenericNack, smpp.StatusInvalidCmdLen}}, true},
		{"UndersizeLength", [][]byte{header(8, uint32(smpp.EnquireLink), 0, 1)}, []answer{{smpp.GenericNack, smpp.StatusInvalidCmdLen}}, true},
		{"DestinationNotANumber", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "abc"}, ShortMessage: []byte("x")})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusInvalidDstAddr}}, false},
		{"UnknownDataCoding", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, DataCoding: 0x09, ShortMessage: []byte("x")})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusSubmitFailed}}, false},
		{"OddUCS2", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, DataCoding: smpp.DCUCS2, ShortMessage: []byte{0x04, 0x1F, 0x04}})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusSubmitFailed}}, false},
		{"ReceiptTypeSubmitted", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, ESMClass: smpp.ESMClassReceipt, ShortMessage: []byte("x")})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusInvalidESMClass}}, false},
		{"BrokenUserDataHeader", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}, ESMClass: smpp.ESMClassUDHI, ShortMessage: []byte{9, 0, 3}})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusInvalidESMClass}}, false},
		{"EmptyMessage", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "33600000001"}})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusInvalidMsgLen}}, false},
		{"NoRoute", [][]byte{trx, submitPDU(2, smpp.SM{Dest: smpp.Address{Addr: "99600000001"}, ShortMessage: []byte("x")})},
			[]answer{ok, {smpp.SubmitSMResp, smpp.StatusInvalidDstAddr}}, false},
	}
}

// dialESME binds a Go ESME; receipts (deliver_sm) are answered ESME_ROK
// and sent to got.
func dialESME(t *testing.T, addr string, bind smpp.CommandID, id, pw string, got chan<- smpp.PDU) *smpp.Session {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
	cfg.Handler = func(s *smpp.Session, req smpp.PDU) {
		_ = s.Reply(req, smpp.StatusOK, &smpp.SMResp{})
		if got != nil {
			got <- req
		}
	}
	s, err := smpp.NewSession(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Bind(ctx, bind, smpp.Bind{SystemID: id, Password: pw}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	return s
}

// submitOne submits a text to dest and returns its message id.
func submitOne(t *testing.T, s *smpp.Session, dest string, registered byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "GoTest"},
		Dest: smpp.Address{Addr: dest}, RegisteredDelivery: registered, ShortMessage: []byte("hello")}})
	if err != nil || resp.Status != smpp.StatusOK {
		t.Fatalf("submit_sm: %v %s", err, resp.Status)
	}
	return resp.Body.(*smpp.SMResp).MessageID
}

// kill -9 while windows of submit_sm are in flight: every submit that got
// its submit_sm_resp is stored after the restart, and what was stored
// without an answer is at most the windows.
func TestSMPPListenKill9(t *testing.T) {
	n, addr, password := smppNode(t)
	const esmes, window = 4, 10
	var (
		mu       sync.Mutex
		answered = map[string]bool{}
	)
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for e := range esmes {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cfg := smpp.DefaultSessionConfig(smpp.RoleESME)
		cfg.Window = window
		s, err := smpp.NewSession(nc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = s.Bind(ctx, smpp.BindTransmitter, smpp.Bind{SystemID: "esme1", Password: password})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		calls := make(chan *smpp.Call, window)
		wg.Add(2)
		go func() { // the sender: keeps the window full until the session ends
			defer wg.Done()
			defer close(calls)
			for i := 0; ; i++ {
				c, err := s.Send(context.Background(), smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "GoTest"},
					Dest: smpp.Address{Addr: fmt.Sprintf("336%02d%06d", e, i)}, ShortMessage: []byte(fmt.Sprintf("esme %d message %d", e, i))}})
				if err != nil {
					return
				}
				calls <- c
			}
		}()
		go func() { // the reader of the answers
			defer wg.Done()
			for c := range calls {
				resp, err := c.Result()
				if err != nil || resp.Status != smpp.StatusOK {
					continue
				}
				mu.Lock()
				answered[resp.Body.(*smpp.SMResp).MessageID] = true
				if len(answered) >= 300 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("300 submits were not answered within a minute")
	}
	n.Kill()
	wg.Wait() // every session ended with the process
	n.Start()
	mu.Lock()
	defer mu.Unlock()
	var lost []string
	for id := range answered {
		var m messages.Message
		if st, err := n.Call("GET", "/api/messages/"+id, nil, &m); err != nil || st != 200 {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d answered submits lost after kill -9: %v", len(lost), len(answered), lost[:min(5, len(lost))])
	}
	stored := storedCount(t, n)
	if extra := stored - int64(len(answered)); extra < 0 || extra > esmes*window {
		t.Errorf("%d stored for %d answered: the unanswered stored ones must be at most the windows (%d)", stored, len(answered), esmes*window)
	}
	t.Logf("%d submits answered before kill -9, %d stored after the restart", len(answered), stored)
}
