package switchboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/actors/smppout/smsctest"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/polltest"
	"github.com/switchboard-dev/switchboard/smpp"
)

// TestSMPPFrontendSendsTheMessageClass: a message submitted over HTTP with
// a message_class reaches the SMSC with the class in data_coding (GSM
// 7-bit class 0, a flash SMS: 0xF0, every part of a long text; UCS-2 class
// 1: 0x19; binary class 2: 0xF6); one without a class keeps 0x00.
func TestSMPPFrontendSendsTheMessageClass(t *testing.T) {
	smsc := smsctest.New(t, "pw", func(smsctest.Submit) (smpp.Status, bool) { return smpp.StatusOK, false })
	h := startNode(t, testConfig(t))
	h.smppFrontend("smsc", "smpp://sb:pw@"+smsc.Addr, "33")

	long := strings.Repeat("flash ", 40) // 240 septets: two parts
	for _, doc := range []map[string]any{
		{"id": "flash", "destination_msisdn": "33600000001", "message_body": long, "message_class": 0},
		{"id": "ucs2", "destination_msisdn": "33600000002", "message_body": "ü ☎", "data_coding": "ucs2", "message_class": 1},
		{"id": "bin", "destination_msisdn": "33600000003", "message_body_base64": []byte{0, 1, 2}, "data_coding": "binary", "message_class": 2},
		{"id": "plain", "destination_msisdn": "33600000004", "message_body": "no class"},
	} {
		doc["source_msisdn"] = "15550001"
		h.must(202, "POST", "/api/messages", doc, nil)
	}
	for _, id := range []string{"flash", "ucs2", "bin", "plain"} {
		h.waitState(id, messages.StateDelivered)
	}
	got := map[string][]string{}
	for _, s := range smsc.Submits() {
		got[s.SM.Dest.Addr] = append(got[s.SM.Dest.Addr], fmt.Sprintf("0x%02X", s.SM.DataCoding))
	}
	want := map[string][]string{"33600000001": {"0xF0", "0xF0"}, "33600000002": {"0x19"}, "33600000003": {"0xF6"}, "33600000004": {"0x00"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("data_coding of the submits by destination: %v, want %v", got, want)
	}
}

// TestSMPPSubmitKeepsTheMessageClass: a submit_sm to the node's SMPP
// listener with data_coding 0xF1 (GSM 7-bit, class 1) is stored with
// message_class 1 and delivered so to a webhook frontend; 0x00 keeps none.
func TestSMPPSubmitKeepsTheMessageClass(t *testing.T) {
	var mu sync.Mutex
	hooked := map[string]messages.Outgoing{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var o messages.Outgoing
		if err := json.NewDecoder(r.Body).Decode(&o); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		mu.Lock()
		hooked[o.ID] = o
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	cfg := testConfig(t)
	cfg.SMPPListen = "127.0.0.1:0"
	h := startNode(t, cfg)
	h.webhookFrontend("hook", hook.URL, "44")

	s := esmeSession(t, h)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Bind(ctx, smpp.BindTransceiver, smpp.Bind{SystemID: "app", Password: "any"}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	submit := func(dc byte, tlvs ...smpp.TLV) string {
		t.Helper()
		resp, err := s.Request(ctx, smpp.PDU{Command: smpp.SubmitSM, Body: &smpp.SM{Source: smpp.Address{Addr: "Shop"},
			Dest: smpp.Address{Addr: "447700900001"}, DataCoding: dc, ShortMessage: []byte("hello"), TLVs: tlvs}})
		if err != nil || resp.Status != smpp.StatusOK {
			t.Fatalf("submit_sm with data_coding 0x%02X: %v %s", dc, err, resp.Status)
		}
		return resp.Body.(*smpp.SMResp).MessageID
	}
	classed, plain := submit(0xF1), submit(smpp.DCDefault)
	// dest_addr_subunit 1 (the MS display) is the ESME's other way to ask
	// for a flash SMS (class 0).
	flash := submit(smpp.DCDefault, smpp.TLV{Tag: smpp.TagDestAddrSubunit, Value: []byte{1}})
	for id, want := range map[string]string{classed: "1", plain: "none", flash: "0"} {
		m := h.waitState(id, messages.StateDelivered)
		if got := classOf(m.MessageClass); got != want || m.DataCoding != messages.CodingGSM7 || m.Body != "hello" {
			t.Errorf("%s stored with message_class %s, data_coding %q, body %q; want %s, gsm7, hello", id, got, m.DataCoding, m.Body, want)
		}
		polltest.Eventually(t, 20*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			o, ok := hooked[id]
			switch {
			case !ok:
				return fmt.Errorf("the webhook has not got %s", id)
			case classOf(o.MessageClass) != want:
				return fmt.Errorf("the webhook got %s with message_class %s, want %s", id, classOf(o.MessageClass), want)
			}
			return nil
		})
	}
}

// classOf shows a message class: its number, or "none".
func classOf(c *int) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprint(*c)
}
