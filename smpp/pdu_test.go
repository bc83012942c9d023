package smpp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// samples are one PDU of each body kind, used by the round-trip test and
// as fuzz seeds.
func samples() []PDU {
	return []PDU{
		{Command: BindTransceiver, Seq: 1, Body: &Bind{SystemID: "esme1", Password: "secret8", SystemType: "VMA",
			InterfaceVersion: InterfaceVersion34, AddrTON: 1, AddrNPI: 1, AddressRange: "^33"}},
		{Command: BindTransceiverResp, Seq: 1, Body: &BindResp{SystemID: "switchboard",
			TLVs: TLVs{{Tag: TagSCInterfaceVersion, Value: []byte{InterfaceVersion34}}}}},
		{Command: BindReceiverResp, Status: StatusInvalidPassword, Seq: 2},
		{Command: SubmitSM, Seq: 3, Body: &SM{ServiceType: "", Source: Address{TON: 5, NPI: 0, Addr: "Switch"},
			Dest: Address{TON: 1, NPI: 1, Addr: "33612345678"}, RegisteredDelivery: RegisteredFinal,
			DataCoding: DCDefault, ShortMessage: []byte("Hello"), ValidityPeriod: "000001000000000R"}},
		{Command: SubmitSM, Seq: 4, Body: &SM{Dest: Address{Addr: "4412"}, DataCoding: DCUCS2, ESMClass: ESMClassUDHI,
			ShortMessage: []byte{5, 0, 3, 7, 2, 1, 0x04, 0x3F}}},
		{Command: SubmitSM, Seq: 5, Body: &SM{Dest: Address{Addr: "4412"}, DataCoding: DCBinary,
			TLVs: TLVs{{Tag: TagMessagePayload, Value: bytes.Repeat([]byte{0xAB}, 600)},
				{Tag: TagSARMsgRefNum, Value: []byte{0, 9}}, {Tag: TagSARTotalSegments, Value: []byte{2}},
				{Tag: TagSARSegmentSeqnum, Value: []byte{1}}}}},
		{Command: SubmitSMResp, Seq: 3, Body: &SMResp{MessageID: "sb-42"}},
		{Command: SubmitSMResp, Status: StatusThrottled, Seq: 4},
		{Command: DeliverSM, Seq: 6, Body: &SM{Source: Address{Addr: "33612345678"}, Dest: Address{Addr: "Switch"},
			ESMClass: ESMClassReceipt, ShortMessage: []byte("id:sb-42 sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat:DELIVRD err:000 text:Hello"),
			TLVs: TLVs{{Tag: TagReceiptedMessageID, Value: CStringValue("sb-42")}, {Tag: TagMessageState, Value: []byte{byte(StateDelivered)}}}}},
		{Command: DeliverSMResp, Seq: 6, Body: &SMResp{}},
		{Command: DataSM, Seq: 7, Body: &DataSMBody{ServiceType: "WAP", Source: Address{Addr: "1"}, Dest: Address{Addr: strings.Repeat("9", 64)},
			DataCoding: DCBinary, TLVs: TLVs{{Tag: TagMessagePayload, Value: []byte{1, 2, 3}}}}},
		{Command: DataSMResp, Seq: 7, Body: &SMResp{MessageID: "d-7"}},
		{Command: QuerySM, Seq: 8, Body: &Query{MessageID: "sb-42", Source: Address{Addr: "Switch"}}},
		{Command: QuerySMResp, Seq: 8, Body: &QueryResp{MessageID: "sb-42", FinalDate: "261202120100000+", MessageState: StateDelivered}},
		{Command: EnquireLink, Seq: 9},
		{Command: EnquireLinkResp, Seq: 9},
		{Command: Unbind, Seq: 10},
		{Command: UnbindResp, Seq: 10},
		{Command: GenericNack, Status: StatusInvalidCmdID, Seq: 11},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, p := range samples() {
		b, err := p.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", p.Command, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: decode: %v", p.Command, err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("%s: round trip\n got %#v\nwant %#v", p.Command, got, p)
		}
		again, err := ReadPDU(bytes.NewReader(b), 0)
		if err != nil || !reflect.DeepEqual(again, p) {
			t.Errorf("%s: ReadPDU = %#v, %v", p.Command, again, err)
		}
	}
}

// The octets of a bind_transmitter and an enquire_link as the
// specification lays them out, written by hand.
func TestKnownOctets(t *testing.T) {
	cases := []struct {
		p   PDU
		hex string
	}{
		{PDU{Command: EnquireLink, Seq: 7}, "00000010" + "00000015" + "00000000" + "00000007"},
		{PDU{Command: BindTransmitter, Seq: 1, Body: &Bind{SystemID: "ab", Password: "pw", InterfaceVersion: 0x34}},
			"0000001b" + "00000002" + "00000000" + "00000001" + "616200" + "707700" + "00" + "34" + "00" + "00" + "00"},
		{PDU{Command: SubmitSMResp, Seq: 2, Body: &SMResp{MessageID: "X"}}, "00000012" + "80000004" + "00000000" + "00000002" + "5800"},
	}
	for _, c := range cases {
		b, err := c.p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex {
			t.Errorf("%s: % x, want %s", c.p.Command, b, c.hex)
		}
	}
}

// Bad input: each a DecodeError with the status to answer it with, never
// a panic.
func TestDecodeRefusals(t *testing.T) {
	good := func(p PDU) []byte {
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sm := good(samples()[3])
	withLen := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		n := len(b)
		b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return b
	}
	cases := []struct {
		name    string
		b       []byte
		status  Status
		framing bool
	}{
		{"short header", []byte{0, 0, 0, 8, 0, 0, 0, 21}, StatusInvalidCmdLen, true},
		{"length disagrees", append(good(PDU{Command: EnquireLink, Seq: 1}), 0), StatusInvalidCmdLen, true},
		{"unknown command", withLen(append(good(PDU{Command: EnquireLink, Seq: 1})[:4], 0, 0, 0, 0x99, 0, 0, 0, 0, 0, 0, 0, 1)), StatusInvalidCmdID, false},
		{"body on enquire_link", withLen(append(good(PDU{Command: EnquireLink, Seq: 1}), 1)), StatusInvalidCmdLen, false},
		{"submit_sm cut short", withLen(sm[:30]), StatusInvalidCmdLen, false},
		{"sm_length past the end", withLen(sm[:len(sm)-2]), StatusInvalidMsgLen, false},
		{"system_id without NUL", withLen(append(good(PDU{Command: BindTransmitter, Seq: 1})[:16], bytes.Repeat([]byte{'a'}, 40)...)), StatusInvalidParamLen, false},
		{"TLV cut", withLen(append(append([]byte(nil), sm...), 0x04, 0x24, 0x00)), StatusInvalidTLVStream, false},
		{"TLV longer than the PDU", withLen(append(append([]byte(nil), sm...), 0x04, 0x24, 0x00, 0x09, 1)), StatusInvalidTLVStream, false},
		{"fixed TLV of the wrong length", withLen(append(append([]byte(nil), sm...), 0x02, 0x0E, 0x00, 0x02, 1, 2)), StatusInvalidParamLen, false},
		{"payload and short_message", withLen(append(append([]byte(nil), sm...), 0x04, 0x24, 0x00, 0x01, 'x')), StatusInvalidMsgLen, false},
		{"sequence out of range", withLen(append(good(PDU{Command: EnquireLink})[:12], 0x80, 0, 0, 1)), StatusInvalidCmdLen, false},
	}
	for _, c := range cases {
		_, err := Decode(c.b)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DecodeError", c.name, err)
			continue
		}
		if de.Status != c.status || de.Framing != c.framing {
			t.Errorf("%s: %v (framing %v), want %s (framing %v)", c.name, err, de.Framing, c.status, c.framing)
		}
	}
}

func TestReadPDULimits(t *testing.T) {
	big := []byte{0, 0x10, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1} // command_length 1 MiB
	_, err := ReadPDU(bytes.NewReader(big), 0)
	var de *DecodeError
	if !errors.As(err, &de) || de.Status != StatusInvalidCmdLen || !de.Framing || de.Seq != 1 {
		t.Errorf("oversize: %v", err)
	}
	if _, err := ReadPDU(bytes.NewReader(nil), 0); err != io.EOF {
		t.Errorf("empty: %v, want io.EOF", err)
	}
	b, _ := PDU{Command: EnquireLink, Seq: 1}.Marshal()
	if _, err := ReadPDU(bytes.NewReader(b[:10]), 0); err != io.ErrUnexpectedEOF {
		t.Errorf("cut header: %v", err)
	}
	sm, _ := samples()[3].Marshal()
	if _, err := ReadPDU(bytes.NewReader(sm[:len(sm)-1]), 0); err != io.ErrUnexpectedEOF {
		t.Errorf("cut body: %v", err)
	}
}

func TestMarshalRefusals(t *testing.T) {
	cases := []PDU{
		{Command: BindTransmitter, Body: &Bind{SystemID: strings.Repeat("s", 16)}},
		{Command: BindTransmitter, Body: &Bind{Password: "123456789"}},
		{Command: SubmitSM, Body: &SM{Dest: Address{Addr: "a\x00b"}}},
		{Command: SubmitSM, Body: &SM{ShortMessage: make([]byte, 255)}},
		{Command: SubmitSM, Body: &SM{TLVs: TLVs{{Tag: TagSARTotalSegments, Value: []byte{1, 2}}}}},
		{Command: SubmitSM, Body: &SM{TLVs: TLVs{{Tag: TagMessagePayload, Value: make([]byte, 70000)}}}},
		{Command: EnquireLink, Seq: MaxSeq + 1},
	}
	for i, p := range cases {
		if _, err := p.Marshal(); err == nil {
			t.Errorf("case %d (%s): encoded", i, p.Command)
		}
	}
}

func TestStatusAndCommandNames(t *testing.T) {
	if StatusThrottled.String() != "ESME_RTHROTTLED" || Status(0x400).String() != "0x00000400" {
		t.Error(StatusThrottled.String(), Status(0x400).String())
	}
	// SMPP v3.4's whole table is named (an SMSC may answer any of it);
	// the reserved and vendor-specific values are not.
	for st, name := range map[Status]string{0x48: "ESME_RINVSRCTON", 0x51: "ESME_RINVDSTNPI", 0x63: "ESME_RINVDFTMSGID", 0x11: "ESME_RCANCELFAIL"} {
		if st.String() != name || !st.Named() {
			t.Errorf("0x%08X: %s, named %v; want %s", uint32(st), st, st.Named(), name)
		}
	}
	for _, st := range []Status{0x09, 0x10, 0x400, 0x4FF, 0xFFFFFFFF} {
		if st.Named() || st.String() != fmt.Sprintf("0x%08X", uint32(st)) {
			t.Errorf("0x%08X: %s, named %v", uint32(st), st, st.Named())
		}
	}
	if !StatusThrottled.Temporary() || !StatusMsgQueueFull.Temporary() || StatusInvalidDstAddr.Temporary() {
		t.Error("Temporary")
	}
	if SubmitSM.Response() != SubmitSMResp || !GenericNack.IsResponse() || SubmitSM.IsResponse() || CommandID(0x99).Known() {
		t.Error("command ids")
	}
}

// Decoding never panics, and what decodes encodes back to the same
// octets.
func FuzzDecode(f *testing.F) {
	for _, p := range samples() {
		b, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("not a DecodeError: %v", err)
			}
			return
		}
		again, err := p.Marshal()
		if err != nil {
			t.Fatalf("%#v decoded but does not encode: %v", p, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded differently:\n% x\n% x", b, again)
		}
	})
}
