package smpp

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

func TestEncodeDecodeContent(t *testing.T) {
	cases := []struct {
		coding messages.DataCoding
		text   string
		bin    []byte
		want   messages.DataCoding
		octets []byte
	}{
		{"", "Hi €", nil, messages.CodingGSM7, []byte{'H', 'i', ' ', 0x1B, 0x65}},
		{"", "Привет", nil, messages.CodingUCS2, []byte{0x04, 0x1F, 0x04, 0x40, 0x04, 0x38, 0x04, 0x32, 0x04, 0x35, 0x04, 0x42}},
		{messages.CodingUCS2, "a😀", nil, messages.CodingUCS2, []byte{0, 'a', 0xD8, 0x3D, 0xDE, 0x00}},
		{messages.CodingGSM7, "@£", nil, messages.CodingGSM7, []byte{0, 1}},
		{messages.CodingBinary, "", []byte{0, 0xFF, 0x0B}, messages.CodingBinary, []byte{0, 0xFF, 0x0B}},
	}
	for _, c := range cases {
		b, got, err := EncodeContent(c.coding, c.text, c.bin)
		if err != nil || got != c.want || !bytes.Equal(b, c.octets) {
			t.Errorf("EncodeContent(%q, %q) = % X, %q, %v; want % X, %q", c.coding, c.text, b, got, err, c.octets, c.want)
			continue
		}
		text, bin, back, err := DecodeContent(DataCodingOf(got, nil), b)
		if err != nil || back != c.want || text != c.text || !bytes.Equal(bin, c.bin) {
			t.Errorf("DecodeContent(0x%02X, % X) = %q, % X, %q, %v", DataCodingOf(got, nil), b, text, bin, back, err)
		}
	}
	if _, _, err := EncodeContent(messages.CodingGSM7, "ç", nil); err == nil {
		t.Error("ç encoded in GSM 7-bit")
	}
	// The other codings a peer may send.
	reads := []struct {
		dc   byte
		in   []byte
		text string
		bin  []byte
		c    messages.DataCoding
	}{
		{DCIA5, []byte("abc"), "abc", nil, ""},
		{DCLatin1, []byte{'c', 0xE7, 'a'}, "cça", nil, ""},
		{0xF0, []byte{'A'}, "A", nil, messages.CodingGSM7},
		{0xF5, []byte{1, 2}, "", []byte{1, 2}, messages.CodingBinary},
		{DCBinary2, []byte{9}, "", []byte{9}, messages.CodingBinary},
	}
	for _, r := range reads {
		text, bin, c, err := DecodeContent(r.dc, r.in)
		if err != nil || text != r.text || !bytes.Equal(bin, r.bin) || c != r.c {
			t.Errorf("DecodeContent(0x%02X) = %q, % X, %q, %v", r.dc, text, bin, c, err)
		}
	}
	for _, bad := range []struct {
		dc byte
		in []byte
	}{{DCUCS2, []byte{0, 'a', 0}}, {DCUCS2, []byte{0xD8, 0x3D}}, {DCIA5, []byte{0x80}}, {0x05, []byte{1}}, {DCDefault, []byte{0x80}}} {
		if _, _, _, err := DecodeContent(bad.dc, bad.in); err == nil {
			t.Errorf("DecodeContent(0x%02X, % X) accepted", bad.dc, bad.in)
		}
	}
}

// docs/smpp.md: 0x00, 0x01, 0x02, 0x03, 0x04, 0x08, 0x10-0x1B and
// 0xF0-0xF7 are read; any other data_coding is refused, the message class
// codings with their reserved bit 3 set (0xF8-0xFF) and the general codings
// of the reserved alphabet (0x1C-0x1F) too.
func TestDecodeContentReadsOnlyTheDocumentedCodings(t *testing.T) {
	for dc := 0; dc <= 0xFF; dc++ {
		read := dc == DCDefault || dc == DCIA5 || dc == DCBinary2 || dc == DCLatin1 || dc == DCBinary || dc == DCUCS2 ||
			(dc >= 0x10 && dc <= 0x1B) || (dc >= 0xF0 && dc <= 0xF7)
		text, bin, c, err := DecodeContent(byte(dc), []byte{'A', 'B'})
		if read && err != nil {
			t.Errorf("data_coding 0x%02X refused: %v", dc, err)
		}
		if !read && err == nil {
			t.Errorf("data_coding 0x%02X read as %q/% X (%q); docs/smpp.md says refused", dc, text, bin, c)
		}
	}
}

// TestMessageClassCodings: the data_coding of each coding with each class
// (GSM 7-bit 0xF0|class, binary 0xF4|class, UCS-2 0x18|class) and without
// one (as before); ClassOf reads the class back from exactly 0x10-0x1B and
// 0xF0-0xF7, and DecodeContent reads such content as its alphabet.
func TestMessageClassCodings(t *testing.T) {
	for _, c := range []struct {
		coding messages.DataCoding
		class  *int
		dc     byte
	}{
		{messages.CodingGSM7, nil, DCDefault}, {"", nil, DCDefault}, {messages.CodingUCS2, nil, DCUCS2}, {messages.CodingBinary, nil, DCBinary},
		{messages.CodingGSM7, messages.Class(0), 0xF0}, {"", messages.Class(3), 0xF3},
		{messages.CodingBinary, messages.Class(0), 0xF4}, {messages.CodingBinary, messages.Class(2), 0xF6},
		{messages.CodingUCS2, messages.Class(0), 0x18}, {messages.CodingUCS2, messages.Class(3), 0x1B},
	} {
		if got := DataCodingOf(c.coding, c.class); got != c.dc {
			t.Errorf("DataCodingOf(%q, %v) = 0x%02X, want 0x%02X", c.coding, c.class, got, c.dc)
		}
	}
	for dc := 0; dc <= 0xFF; dc++ {
		classed := (dc >= 0x10 && dc <= 0x1B) || (dc >= 0xF0 && dc <= 0xF7)
		got := ClassOf(byte(dc))
		switch {
		case classed && (got == nil || *got != dc&3):
			t.Errorf("ClassOf(0x%02X) = %v, want %d", dc, got, dc&3)
		case !classed && got != nil:
			t.Errorf("ClassOf(0x%02X) = %d, want none", dc, *got)
		}
	}
	for _, c := range []struct {
		dc     byte
		in     []byte
		text   string
		bin    []byte
		coding messages.DataCoding
	}{
		{0x11, []byte{'h', 'i'}, "hi", nil, messages.CodingGSM7},
		{0xF1, []byte{'h', 'i'}, "hi", nil, messages.CodingGSM7},
		{0x16, []byte{0xDE, 0xAD}, "", []byte{0xDE, 0xAD}, messages.CodingBinary},
		{0x1A, []byte{0x00, 0xFC}, "ü", nil, messages.CodingUCS2},
	} {
		text, bin, coding, err := DecodeContent(c.dc, c.in)
		if err != nil || text != c.text || string(bin) != string(c.bin) || coding != c.coding {
			t.Errorf("DecodeContent(0x%02X, % X) = %q, % X, %q, %v; want %q, % X, %q", c.dc, c.in, text, bin, coding, err, c.text, c.bin, c.coding)
		}
	}
}

// UCS-2 is read by its 16-bit units: U+FFFD (REPLACEMENT CHARACTER, a
// valid character the API takes) is text, a surrogate pair one character,
// and only a high surrogate not followed by a low one, or a low one not
// after a high one, is refused.
func TestDecodeUCS2Surrogates(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		text string
	}{
		{[]byte{0x00, 'o', 0x00, 'k', 0xFF, 0xFD}, "ok\uFFFD"},
		{[]byte{0xFF, 0xFD, 0xD8, 0x3D, 0xDE, 0x00, 0xFF, 0xFD}, "\uFFFD😀\uFFFD"},
		{[]byte{0xD8, 0x34, 0xDD, 0x1E}, "𝄞"},
	} {
		text, _, dc, err := DecodeContent(DCUCS2, c.in)
		if err != nil || text != c.text || dc != messages.CodingUCS2 {
			t.Errorf("DecodeContent(UCS-2 % X) = %q, %q, %v; want %q", c.in, text, dc, err, c.text)
		}
		// The API takes the same text.
		sub := messages.Submission{SourceMSISDN: "S", DestinationMSISDN: "4477", Body: c.text, Options: messages.Options{DataCoding: messages.CodingUCS2}}
		if err := sub.Validate(); err != nil {
			t.Errorf("the API refuses %q: %v", c.text, err)
		}
	}
	for _, bad := range [][]byte{
		{0xD8, 0x3D},             // a high surrogate at the end
		{0xD8, 0x3D, 0x00, 'a'},  // followed by a character
		{0xD8, 0x3D, 0xD8, 0x3D}, // followed by another high one
		{0xDE, 0x00},             // a low surrogate alone
		{0x00, 'a', 0xDE, 0x00},  // a low one after a character
	} {
		if text, _, _, err := DecodeContent(DCUCS2, bad); err == nil {
			t.Errorf("DecodeContent(UCS-2 % X) = %q; want an unpaired surrogate refused", bad, text)
		}
	}
}

func TestSplitAndParts(t *testing.T) {
	one, err := Split(messages.CodingGSM7, bytes.Repeat([]byte{'a'}, 160), 1)
	if err != nil || len(one) != 1 || len(one[0]) != 160 {
		t.Fatalf("160 septets: %d parts, %v", len(one), err)
	}
	// 161 septets whose 153rd is an escape: the escape moves to part 2.
	gsm := append(bytes.Repeat([]byte{'a'}, 152), 0x1B, 0x65, 'b', 'c', 'd', 'e', 'f', 'g', 'h')
	parts, err := Split(messages.CodingGSM7, gsm, 7)
	if err != nil || len(parts) != 2 {
		t.Fatalf("gsm: %d parts, %v", len(parts), err)
	}
	if len(parts[0]) != udhLen+152 || parts[1][udhLen] != 0x1B {
		t.Errorf("the escape was cut from its septet: % X / % X", parts[0][len(parts[0])-2:], parts[1][:udhLen+2])
	}
	// UCS-2 with a surrogate pair across octet 134.
	u := append(bytes.Repeat([]byte{0, 'x'}, 66), 0xD8, 0x3D, 0xDE, 0x00, 0, 'y', 0, 'z', 0, 'w')
	parts, err = Split(messages.CodingUCS2, u, 9)
	if err != nil || len(parts) != 2 || len(parts[0]) != udhLen+132 {
		t.Fatalf("ucs2: %d parts (%d octets in the first), %v", len(parts), len(parts[0]), err)
	}
	var joined []byte
	for i, p := range parts {
		sm := &SM{ESMClass: ESMClassUDHI, ShortMessage: p}
		part, ok, err := PartOf(sm)
		if err != nil || !ok || part.Ref != 9 || part.Total != 2 || int(part.Seq) != i+1 {
			t.Fatalf("PartOf part %d = %+v, %v, %v", i, part, ok, err)
		}
		joined = append(joined, part.Data...)
	}
	if !bytes.Equal(joined, u) {
		t.Error("the parts do not join to the message")
	}
	if _, err := Split(messages.CodingBinary, make([]byte, 134*256), 1); err == nil {
		t.Error("256 parts accepted")
	}

	// sar_* TLVs, a 16-bit reference header, and refusals.
	sar := &SM{ShortMessage: []byte("x"), TLVs: TLVs{{Tag: TagSARMsgRefNum, Value: []byte{1, 2}},
		{Tag: TagSARTotalSegments, Value: []byte{3}}, {Tag: TagSARSegmentSeqnum, Value: []byte{2}}}}
	if p, ok, err := PartOf(sar); err != nil || !ok || p.Ref != 0x0102 || p.Total != 3 || p.Seq != 2 || string(p.Data) != "x" {
		t.Errorf("sar: %+v %v %v", p, ok, err)
	}
	udh16 := &SM{ESMClass: ESMClassUDHI, ShortMessage: []byte{6, 8, 4, 0xAB, 0xCD, 2, 2, 'z'}}
	if p, ok, err := PartOf(udh16); err != nil || !ok || p.Ref != 0xABCD || p.Seq != 2 || string(p.Data) != "z" {
		t.Errorf("16-bit: %+v %v %v", p, ok, err)
	}
	if _, ok, err := PartOf(&SM{ShortMessage: []byte("plain")}); ok || err != nil {
		t.Error("a plain message is a part")
	}
	for i, bad := range []*SM{
		{ESMClass: ESMClassUDHI},
		{ESMClass: ESMClassUDHI, ShortMessage: []byte{9, 0, 3}},
		{ESMClass: ESMClassUDHI, ShortMessage: []byte{5, 0, 3, 1, 2, 3}},
		{ESMClass: ESMClassUDHI, ShortMessage: []byte{5, 0, 3, 1, 0, 0, 'a'}},
		{ESMClass: ESMClassUDHI, ShortMessage: []byte{8, 0, 3, 1, 2, 1, 0x24, 1, 1, 'a'}},                    // a language shift beside it
		{ESMClass: ESMClassUDHI, ShortMessage: []byte{11, 5, 4, 0x0B, 0x84, 0x23, 0xF0, 0, 3, 1, 2, 1, 'a'}}, // a port before it
		{TLVs: TLVs{{Tag: TagSARMsgRefNum, Value: []byte{1, 2}}}},
	} {
		if _, _, err := PartOf(bad); err == nil {
			t.Errorf("bad part %d accepted", i)
		}
	}
}

func TestReceipt(t *testing.T) {
	r := Receipt{ID: "sb-42", Submitted: 1, Delivered: 1, SubmitDate: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC),
		DoneDate: time.Date(2026, 12, 2, 12, 1, 0, 0, time.UTC), Stat: StateDelivered.Stat(), Err: "000", Text: "Hello world"}
	s := r.String()
	if s != "id:sb-42 sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat:DELIVRD err:000 text:Hello world" {
		t.Errorf("String = %q", s)
	}
	back, err := ParseReceipt(s)
	if err != nil || back != r {
		t.Errorf("ParseReceipt = %+v, %v", back, err)
	}
	// Another SMSC's spelling: upper-case keys, seconds, no text.
	o, err := ParseReceipt("id:0A1B sub:001 dlvrd:000 Submit date:261202120000 Done date:261202120130 stat:UNDELIV err:021")
	if err != nil || o.ID != "0A1B" || o.Stat != "UNDELIV" || o.Err != "021" || o.DoneDate.Second() != 30 || o.Text != "" {
		t.Errorf("ParseReceipt = %+v, %v", o, err)
	}
	if st, ok := StateOfStat(o.Stat); !ok || st != StateUndeliverable || !st.Final() {
		t.Errorf("StateOfStat(UNDELIV) = %v %v", st, ok)
	}
	for _, bad := range []string{"", "hello", "id: sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat:DELIVRD err:000",
		"id:1 sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat: err:000",
		"receipted_id:1 stat:DELIVRD", "id:1 text:stat:DELIVRD"} {
		if _, err := ParseReceipt(bad); err == nil {
			t.Errorf("ParseReceipt(%q) accepted", bad)
		}
	}
	if !strings.Contains(StateEnroute.Stat(), "ENROUTE") || StateEnroute.Final() || MessageState(99).Final() {
		t.Error("states")
	}
}

// Only id and stat are required: SMSCs leave out other keys, order them
// otherwise, write 4-digit years; a key missing, or a sub, dlvrd or date
// that cannot be read, leaves its field unset, and the receipt is read.
func TestParseReceiptNeedsOnlyIDAndStat(t *testing.T) {
	at := func(y int, mo time.Month, d, h, mi, s int) time.Time {
		return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
	}
	for _, c := range []struct {
		text string
		want Receipt
	}{
		{"id:12345 stat:DELIVRD", Receipt{ID: "12345", Stat: "DELIVRD"}},
		{"id:12345 sub:001 dlvrd:001 submit date:20261202112000 done date:20261202112130 stat:DELIVRD err:000 text:",
			Receipt{ID: "12345", Submitted: 1, Delivered: 1, SubmitDate: at(2026, 12, 2, 11, 20, 0), DoneDate: at(2026, 12, 2, 11, 21, 30), Stat: "DELIVRD", Err: "000"}},
		{"id:12345 submit date:202612021120 done date:202612021121 stat:DELIVRD",
			Receipt{ID: "12345", SubmitDate: at(2026, 12, 2, 11, 20, 0), DoneDate: at(2026, 12, 2, 11, 21, 0), Stat: "DELIVRD"}},
		{"id:12345 sub:001 dlvrd:001 submit date:2612021120 done date:2612021121 stat:DELIVRD",
			Receipt{ID: "12345", Submitted: 1, Delivered: 1, SubmitDate: at(2026, 12, 2, 11, 20, 0), DoneDate: at(2026, 12, 2, 11, 21, 0), Stat: "DELIVRD"}},
		{"id:12345 submit date:2612021120 done date:2612021121 stat:UNDELIV err:001 text:hi",
			Receipt{ID: "12345", SubmitDate: at(2026, 12, 2, 11, 20, 0), DoneDate: at(2026, 12, 2, 11, 21, 0), Stat: "UNDELIV", Err: "001", Text: "hi"}},
		{"id:12345 sub:001 dlvrd:001 submit date:2612021120 done date:2612021121 err:000 stat:delivrd text:",
			Receipt{ID: "12345", Submitted: 1, Delivered: 1, SubmitDate: at(2026, 12, 2, 11, 20, 0), DoneDate: at(2026, 12, 2, 11, 21, 0), Stat: "DELIVRD", Err: "000"}},
		{"stat:DELIVRD err:000 id:12345", Receipt{ID: "12345", Stat: "DELIVRD", Err: "000"}},
		// The text is free-form: keys in it are its own.
		{"id:12345 stat:DELIVRD text:your id:99 stat:x err:1", Receipt{ID: "12345", Stat: "DELIVRD", Text: "your id:99 stat:x err:1"}},
		// Values that cannot be read: unset.
		{"id:1 sub:x dlvrd:001 submit date:2612021200 done date:2612021201 stat:DELIVRD err:0",
			Receipt{ID: "1", Delivered: 1, SubmitDate: at(2026, 12, 2, 12, 0, 0), DoneDate: at(2026, 12, 2, 12, 1, 0), Stat: "DELIVRD", Err: "0"}},
		{"id:1 sub:001 dlvrd:001 submit date:26120 done date:2613021201 stat:DELIVRD err:0",
			Receipt{ID: "1", Submitted: 1, Delivered: 1, Stat: "DELIVRD", Err: "0"}},
	} {
		r, err := ParseReceipt(c.text)
		if err != nil || r != c.want {
			t.Errorf("ParseReceipt(%q) = %+v, %v; want %+v", c.text, r, err, c.want)
		}
	}
}

// Bytes that are not ASCII (invalid UTF-8 from an SMSC's Latin-1 or
// binary junk, or a rune whose lower case has another width, as U+212A
// KELVIN SIGN) do not move the keys the parser finds: the values are cut
// at the right offsets, and nothing panics.
func TestParseReceiptNonASCIIBytes(t *testing.T) {
	const tail = "id:1 sub:001 dlvrd:001 submit date:2401010000 done date:2401010000 stat:DELIVRD err:000 text:x"
	for _, s := range []string{
		strings.Repeat("\xff", 40) + tail,
		strings.Repeat("\u212a", 40) + tail,
		strings.Repeat("\xe9", 40) + tail,
		"id:\xe9\xff sub:001 dlvrd:001 submit date:2401010000 done date:2401010000 stat:DELIVRD err:000 text:caf\xe9 \u212a\xff",
	} {
		var r Receipt
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("ParseReceipt(%q) panicked: %v", s, p)
				}
			}()
			r, err = ParseReceipt(s)
		}()
		if err != nil || r.Stat != "DELIVRD" || r.Submitted != 1 || r.Delivered != 1 || r.Err != "000" {
			t.Errorf("ParseReceipt(%q) = %+v, %v", s, r, err)
		}
	}
	r, err := ParseReceipt(strings.Repeat("\u212a", 40) + tail)
	if err != nil || r.ID != "1" || r.Text != "x" {
		t.Errorf("after U+212A: %+v, %v", r, err)
	}
	r, err = ParseReceipt("id:\xe9\xff sub:001 dlvrd:001 submit date:2401010000 done date:2401010000 stat:DELIVRD err:000 text:caf\xe9 \u212a\xff")
	if err != nil || r.ID != "\xe9\xff" || r.Text != "caf\xe9 \u212a\xff" {
		t.Errorf("non-ASCII values: %+v, %v", r, err)
	}
}

// A receipt's text never panics the parser.
func FuzzParseReceipt(f *testing.F) {
	f.Add("id:sb-42 sub:001 dlvrd:001 submit date:2612021200 done date:2612021201 stat:DELIVRD err:000 text:Hello")
	f.Add("id:1 stat:x")
	f.Add("stat:DELIVRD err:000 submit date:20261202112000 ID:7 text:id:8 stat:x")
	f.Add("receipted_id:1 xstat:x id:2 stat:y")
	f.Add(strings.Repeat("\xff", 40) + "id:1 sub:001 dlvrd:001 submit date:2401010000 done date:2401010000 stat:DELIVRD err:000 text:x")
	f.Add(strings.Repeat("\u212a", 40) + "id:1 sub:001 dlvrd:001 submit date:2401010000 done date:2401010000 stat:DELIVRD err:000 text:x")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReceipt(s)
		if err == nil && (r.ID == "" || r.Stat == "") {
			t.Fatalf("accepted %q without id or stat", s)
		}
	})
}
