package smpp

import (
	"encoding/binary"
	"fmt"
)

// Tag is a TLV's parameter tag.
type Tag uint16

// The TLVs in use.
const (
	TagDestAddrSubunit      Tag = 0x0005
	TagReceiptedMessageID   Tag = 0x001E
	TagUserMessageReference Tag = 0x0204
	TagSARMsgRefNum         Tag = 0x020C
	TagSARTotalSegments     Tag = 0x020E
	TagSARSegmentSeqnum     Tag = 0x020F
	TagSCInterfaceVersion   Tag = 0x0210
	TagNetworkErrorCode     Tag = 0x0423
	TagMessagePayload       Tag = 0x0424
	TagMessageState         Tag = 0x0427
)

// fixedLen is the value length of the TLVs whose length is fixed.
var fixedLen = map[Tag]int{
	TagDestAddrSubunit: 1, TagUserMessageReference: 2, TagSARMsgRefNum: 2, TagSARTotalSegments: 1, TagSARSegmentSeqnum: 1,
	TagSCInterfaceVersion: 1, TagNetworkErrorCode: 3, TagMessageState: 1,
}

// maxLen is the longest value of the TLVs whose length is bounded.
var maxLen = map[Tag]int{TagReceiptedMessageID: 65}

// TLV is one optional parameter. An unknown tag is kept as it came.
type TLV struct {
	Tag   Tag
	Value []byte
}

// TLVs are a PDU's optional parameters in their order.
type TLVs []TLV

// Get returns the value of the first TLV of tag.
func (ts TLVs) Get(tag Tag) ([]byte, bool) {
	for _, t := range ts {
		if t.Tag == tag {
			return t.Value, true
		}
	}
	return nil, false
}

// Uint reads the first TLV of tag as a big-endian unsigned integer of 1,
// 2 or 4 octets.
func (ts TLVs) Uint(tag Tag) (uint32, bool) {
	v, ok := ts.Get(tag)
	if !ok {
		return 0, false
	}
	switch len(v) {
	case 1:
		return uint32(v[0]), true
	case 2:
		return uint32(binary.BigEndian.Uint16(v)), true
	case 4:
		return binary.BigEndian.Uint32(v), true
	}
	return 0, false
}

// CString reads the first TLV of tag as a C-Octet string (its NUL, when
// there, dropped).
func (ts TLVs) CString(tag Tag) (string, bool) {
	v, ok := ts.Get(tag)
	if !ok {
		return "", false
	}
	if n := len(v); n > 0 && v[n-1] == 0 {
		v = v[:n-1]
	}
	return string(v), true
}

// With returns ts with the TLV of tag set to value (replacing the first
// one of tag, else appended).
func (ts TLVs) With(tag Tag, value []byte) TLVs {
	for i, t := range ts {
		if t.Tag == tag {
			out := append(TLVs(nil), ts...)
			out[i].Value = value
			return out
		}
	}
	return append(ts, TLV{Tag: tag, Value: value})
}

// CStringValue is s as a C-Octet string TLV value (with its NUL).
func CStringValue(s string) []byte { return append([]byte(s), 0) }

func (ts TLVs) encode(w *writer) error {
	for _, t := range ts {
		if len(t.Value) > 0xFFFF {
			return fmt.Errorf("TLV 0x%04X: %d octets, at most 65535", uint16(t.Tag), len(t.Value))
		}
		if n, ok := fixedLen[t.Tag]; ok && len(t.Value) != n {
			return fmt.Errorf("TLV 0x%04X: %d octets, must be %d", uint16(t.Tag), len(t.Value), n)
		}
		if n, ok := maxLen[t.Tag]; ok && len(t.Value) > n {
			return fmt.Errorf("TLV 0x%04X: %d octets, at most %d", uint16(t.Tag), len(t.Value), n)
		}
		w.u16(uint16(t.Tag))
		w.u16(uint16(len(t.Value)))
		w.b = append(w.b, t.Value...)
	}
	return nil
}

// decodeTLVs reads the TLVs up to the end of the PDU.
func decodeTLVs(r *reader) (TLVs, error) {
	var ts TLVs
	for r.left() > 0 {
		if r.left() < 4 {
			return nil, derr(StatusInvalidTLVStream, "TLVs", "%d octets left, a TLV needs at least 4", r.left())
		}
		tag := Tag(binary.BigEndian.Uint16(r.b[r.off:]))
		n := int(binary.BigEndian.Uint16(r.b[r.off+2:]))
		r.off += 4
		field := fmt.Sprintf("TLV 0x%04X", uint16(tag))
		if n > r.left() {
			return nil, derr(StatusInvalidTLVStream, field, "length %d, but %d octets are left", n, r.left())
		}
		if want, ok := fixedLen[tag]; ok && n != want {
			return nil, derr(StatusInvalidParamLen, field, "length %d, must be %d", n, want)
		}
		if most, ok := maxLen[tag]; ok && n > most {
			return nil, derr(StatusInvalidParamLen, field, "length %d, at most %d", n, most)
		}
		v, _ := r.bytes(field, n)
		ts = append(ts, TLV{Tag: tag, Value: v})
	}
	return ts, nil
}
