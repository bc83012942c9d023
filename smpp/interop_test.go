package smpp

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smpp/smpptest"
)

func needNetSMPP(t *testing.T) { smpptest.NeedNetSMPP(t) }

func perlScript(t *testing.T, name string, args ...string) (*bufio.Scanner, func() string) {
	return smpptest.Script(t, filepath.Join("testdata", name), args...)
}

func expectLines(t *testing.T, sc *bufio.Scanner, want ...string) {
	t.Helper()
	smpptest.Expect(t, sc, want...)
}

// send writes p to c.
func send(t *testing.T, c net.Conn, p PDU) {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// read reads the next PDU from c and checks its command.
func read(t *testing.T, c net.Conn, want CommandID) PDU {
	t.Helper()
	p, err := ReadPDU(c, 0)
	if err != nil {
		t.Fatalf("reading %s: %v", want, err)
	}
	if p.Command != want {
		t.Fatalf("got %s #%d, want %s", p.Command, p.Seq, want)
	}
	return p
}

// Net::SMPP as the ESME, this codec as the SMSC: our decoder reads what
// Net::SMPP encodes (a bind, text in GSM 7-bit and UCS-2, binary with a
// user data header, message_payload, sar_* TLVs), and Net::SMPP reads
// what our encoder answers (bind and submit responses, a refusal without
// a body, a delivery receipt, enquire_link and unbind responses).
func TestInteropNetSMPPESME(t *testing.T) {
	needNetSMPP(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	sc, wait := perlScript(t, "esme.pl", "127.0.0.1", port)
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))

	bind := read(t, c, BindTransceiver)
	b := bind.Body.(*Bind)
	if b.SystemID != "perlesme" || b.Password != "secret" || b.SystemType != "IOP" || b.InterfaceVersion != InterfaceVersion34 {
		t.Fatalf("bind: %+v", b)
	}
	send(t, c, PDU{Command: BindTransceiverResp, Seq: bind.Seq, Body: &BindResp{SystemID: "gosmsc",
		TLVs: TLVs{{Tag: TagSCInterfaceVersion, Value: []byte{InterfaceVersion34}}}}})

	type check func(t *testing.T, s *SM)
	text := func(want string, coding messages.DataCoding) check {
		return func(t *testing.T, s *SM) {
			got, _, c, err := DecodeContent(s.DataCoding, s.Payload())
			if err != nil || got != want || c != coding {
				t.Errorf("content %q (%q), %v; want %q (%q)", got, c, err, want, coding)
			}
		}
	}
	part := func(ref uint16, total, seq byte, data string, dc byte) check {
		return func(t *testing.T, s *SM) {
			p, ok, err := PartOf(s)
			if err != nil || !ok || p.Ref != ref || p.Total != total || p.Seq != seq || string(p.Data) != data || s.DataCoding != dc {
				t.Errorf("part %+v %v %v (data_coding %d)", p, ok, err, s.DataCoding)
			}
		}
	}
	checks := []check{
		func(t *testing.T, s *SM) {
			text("Hi @£€", messages.CodingGSM7)(t, s)
			if s.RegisteredDelivery != RegisteredFinal || s.Source != (Address{TON: 5, Addr: "PerlTest"}) ||
				s.Dest != (Address{TON: 1, NPI: 1, Addr: "33600000001"}) {
				t.Errorf("submit 1: %+v", s)
			}
		},
		text("Привет", messages.CodingUCS2),
		part(0x2A, 1, 1, "\xDE\xAD\xBE\xEF", DCBinary),
		text(strings.Repeat("A", 300), messages.CodingGSM7),
		part(0x1234, 2, 1, "part", DCDefault),
	}
	for i, ck := range checks {
		p := read(t, c, SubmitSM)
		ck(t, p.Body.(*SM))
		send(t, c, PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: "g-" + string(rune('1'+i))}})
	}
	bad := read(t, c, SubmitSM)
	if bad.Body.(*SM).Dest.Addr != "bad" {
		t.Fatalf("submit 6: %+v", bad.Body)
	}
	send(t, c, PDU{Command: SubmitSMResp, Status: StatusInvalidDstAddr, Seq: bad.Seq})

	r := Receipt{ID: "g-1", Submitted: 1, Delivered: 1, SubmitDate: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC),
		DoneDate: time.Date(2026, 12, 2, 12, 1, 0, 0, time.UTC), Stat: StateDelivered.Stat(), Err: "000", Text: "Hi"}
	send(t, c, PDU{Command: DeliverSM, Seq: 1, Body: &SM{Source: Address{TON: 1, NPI: 1, Addr: "33600000001"},
		Dest: Address{TON: 5, Addr: "PerlTest"}, ESMClass: ESMClassReceipt, ShortMessage: []byte(r.String()),
		TLVs: TLVs{{Tag: TagReceiptedMessageID, Value: CStringValue("g-1")}, {Tag: TagMessageState, Value: []byte{byte(StateDelivered)}}}}})
	if resp := read(t, c, DeliverSMResp); resp.Seq != 1 || resp.Status != StatusOK {
		t.Fatalf("deliver_sm_resp: %+v", resp)
	}
	el := read(t, c, EnquireLink)
	send(t, c, PDU{Command: EnquireLinkResp, Seq: el.Seq})
	ub := read(t, c, Unbind)
	send(t, c, PDU{Command: UnbindResp, Seq: ub.Seq})

	expectLines(t, sc,
		"bind_transceiver_resp status=0 system_id=gosmsc sc_interface_version=34",
		"submit_sm_resp status=0 message_id=g-1",
		"submit_sm_resp status=0 message_id=g-2",
		"submit_sm_resp status=0 message_id=g-3",
		"submit_sm_resp status=0 message_id=g-4",
		"submit_sm_resp status=0 message_id=g-5",
		"submit_sm_resp status=11 message_id=",
		"deliver_sm cmd=0x00000005 esm_class=4 source=33600000001 dest=PerlTest data_coding=0 receipted=g-1 state=2 sm="+r.String(),
		"enquire_link_resp status=0",
		"unbind_resp status=0",
	)
	wait()
}

// This codec as the ESME, Net::SMPP as the SMSC: Net::SMPP decodes our
// bind and submits (GSM 7-bit, UCS-2 with a surrogate pair, binary, a
// long text split with user data headers, sar_* TLVs, message_payload) and
// we decode its responses and its delivery receipt.
func TestInteropNetSMPPSMSC(t *testing.T) {
	needNetSMPP(t)
	sc, wait := perlScript(t, "smsc.pl")
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "port=") {
		t.Fatalf("smsc.pl did not print its port: %q", sc.Text())
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strings.TrimPrefix(sc.Text(), "port="))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))

	send(t, c, PDU{Command: BindTransceiver, Seq: 1, Body: &Bind{SystemID: "switchbd", Password: "pw123456",
		SystemType: "SB", InterfaceVersion: InterfaceVersion34}})
	if resp := read(t, c, BindTransceiverResp); resp.Status != StatusOK || resp.Body.(*BindResp).SystemID != "perlsmsc" {
		t.Fatalf("bind resp: %+v", resp)
	}
	expectLines(t, sc, "bind_transceiver system_id=switchbd password=pw123456 system_type=SB interface_version=52")

	src := Address{TON: 5, Addr: "Switch"}
	dst := Address{TON: 1, NPI: 1, Addr: "33612345678"}
	content := func(c messages.DataCoding, text string, bin []byte) ([]byte, byte) {
		b, used, err := EncodeContent(c, text, bin)
		if err != nil {
			t.Fatal(err)
		}
		return b, DataCodingOf(used, nil)
	}
	long := strings.Repeat("0123456789", 16) + "€!" // 162 characters, 163 septets: two parts
	longSeptets, _ := content(messages.CodingGSM7, long, nil)
	parts, err := Split(messages.CodingGSM7, longSeptets, 0x77)
	if err != nil || len(parts) != 2 {
		t.Fatalf("split: %d parts, %v", len(parts), err)
	}
	gsm, dcGSM := content("", "Hi @£€", nil)
	ucs, dcUCS := content("", "Привет 😀", nil)
	bin, dcBin := content(messages.CodingBinary, "", []byte{0x0B, 0x05, 0x04, 0x0B, 0x84, 0x23, 0xF0})
	submits := []*SM{
		{Source: src, Dest: dst, RegisteredDelivery: RegisteredFinal, DataCoding: dcGSM, ShortMessage: gsm},
		{Source: src, Dest: dst, DataCoding: dcUCS, ShortMessage: ucs},
		{Source: src, Dest: dst, DataCoding: dcBin, ESMClass: ESMClassUDHI, ShortMessage: bin},
		{Source: src, Dest: dst, DataCoding: DCDefault, ESMClass: ESMClassUDHI, ShortMessage: parts[0]},
		{Source: src, Dest: dst, DataCoding: DCDefault, ESMClass: ESMClassUDHI, ShortMessage: parts[1]},
		{Source: src, Dest: dst, DataCoding: DCDefault, ShortMessage: []byte("sar"), TLVs: TLVs{
			{Tag: TagSARMsgRefNum, Value: []byte{0xBE, 0xEF}}, {Tag: TagSARTotalSegments, Value: []byte{3}},
			{Tag: TagSARSegmentSeqnum, Value: []byte{3}}}},
		{Source: src, Dest: dst, DataCoding: DCDefault, TLVs: TLVs{{Tag: TagMessagePayload, Value: longSeptets}}},
	}
	hexOf := func(b []byte) string {
		const digits = "0123456789abcdef"
		out := make([]byte, 0, 2*len(b))
		for _, v := range b {
			out = append(out, digits[v>>4], digits[v&15])
		}
		return string(out)
	}
	for i, s := range submits {
		seq := uint32(2 + i)
		send(t, c, PDU{Command: SubmitSM, Seq: seq, Body: s})
		resp := read(t, c, SubmitSMResp)
		if resp.Seq != seq || resp.Status != StatusOK || resp.Body.(*SMResp).MessageID != "p-"+string(rune('1'+i)) {
			t.Fatalf("submit %d: %+v %+v", i+1, resp, resp.Body)
		}
		sar := "-"
		if i == 5 {
			sar = "48879/3/3"
		}
		sm, payload := hexOf(s.ShortMessage), ""
		if i == 6 {
			sm, payload = "", hexOf(longSeptets)
		}
		expectLines(t, sc, "submit_sm seq="+itoa(seq)+" source=5/0/Switch dest=1/1/33612345678 esm_class="+itoa(uint32(s.ESMClass))+
			" registered_delivery="+itoa(uint32(s.RegisteredDelivery))+" data_coding="+itoa(uint32(s.DataCoding))+
			" sm="+sm+" payload="+payload+" sar="+sar)
		if i == 2 { // after the third submit the SMSC sends a receipt
			dl := read(t, c, DeliverSM)
			d := dl.Body.(*SM)
			id, _ := d.TLVs.CString(TagReceiptedMessageID)
			st, _ := d.TLVs.Uint(TagMessageState)
			rc, err := ParseReceipt(string(d.ShortMessage))
			if err != nil || d.ESMClass&ESMClassTypeMask != ESMClassReceipt || id != "p-1" || MessageState(st) != StateDelivered ||
				rc.ID != "p-1" || rc.Stat != "DELIVRD" || rc.Text != "Hi" || d.Dest.Addr != src.Addr {
				t.Fatalf("receipt: %+v, %q %d, %+v, %v", d, id, st, rc, err)
			}
			send(t, c, PDU{Command: DeliverSMResp, Seq: dl.Seq, Body: &SMResp{}})
			expectLines(t, sc, "deliver_sm_resp status=0")
		}
	}
	send(t, c, PDU{Command: EnquireLink, Seq: 50})
	read(t, c, EnquireLinkResp)
	send(t, c, PDU{Command: Unbind, Seq: 51})
	read(t, c, UnbindResp)
	expectLines(t, sc, "enquire_link", "unbind")
	wait()
}

func itoa(v uint32) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}
