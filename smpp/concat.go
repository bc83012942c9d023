package smpp

import (
	"fmt"

	"github.com/switchboard-dev/switchboard/gsm7"
	"github.com/switchboard-dev/switchboard/messages"
)

// The capacity of one SMS (140 octets on the air) in the octets of each
// coding as SMPP carries them, alone and as a part behind a 6-octet
// concatenation header.
const (
	singleGSM7   = 160 // septets
	partGSM7     = 153
	singleOctets = 140 // UCS-2 and binary
	partOctets   = 134
	udhLen       = 6 // UDHL, IEI 0x00, IEDL 3, reference, total, sequence
	// MaxParts is the most parts a concatenated message can have.
	MaxParts = 255
)

// Split cuts a message's encoded content (see EncodeContent) into the
// short_messages that carry it: one when it fits a single SMS, else parts
// that each begin with a concatenation header (IEI 0x00, 8-bit reference
// ref) and go with esm_class ESMClassUDHI. A GSM escape and its septet, and
// a UTF-16 surrogate pair, are never cut apart.
func Split(c messages.DataCoding, content []byte, ref byte) ([][]byte, error) {
	if FitsOne(c, content) {
		return [][]byte{content}, nil
	}
	part := partOctets
	if c == messages.CodingGSM7 {
		part = partGSM7
	}
	var chunks [][]byte
	for rest := content; len(rest) > 0; {
		n := min(part, len(rest))
		if n < len(rest) {
			switch c {
			case messages.CodingGSM7:
				if rest[n-1] == gsm7.Escape && escapeOpens(rest[:n]) {
					n--
				}
			case messages.CodingUCS2:
				if n%2 != 0 {
					n--
				}
				if hi := rest[n-2]; hi >= 0xD8 && hi <= 0xDB { // a high surrogate ends the part
					n -= 2
				}
			}
		}
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	if len(chunks) > MaxParts {
		return nil, fmt.Errorf("%d parts, at most %d", len(chunks), MaxParts)
	}
	out := make([][]byte, len(chunks))
	for i, ch := range chunks {
		out[i] = append([]byte{udhLen - 1, 0x00, 3, ref, byte(len(chunks)), byte(i + 1)}, ch...)
	}
	return out, nil
}

// FitsOne reports whether a message's encoded content (see
// EncodeContent) of coding c fits a single SMS: 160 septets in GSM
// 7-bit, 140 octets in UCS-2 and binary.
func FitsOne(c messages.DataCoding, content []byte) bool {
	if c == messages.CodingGSM7 {
		return len(content) <= singleGSM7
	}
	return len(content) <= singleOctets
}

// escapeOpens reports whether the escape that ends b opens an extension
// character (rather than being the second septet of an escaped escape).
func escapeOpens(b []byte) bool {
	n := 0
	for i := len(b) - 1; i >= 0 && b[i] == gsm7.Escape; i-- {
		n++
	}
	return n%2 == 1
}

// Part is one part of a concatenated message.
type Part struct {
	Ref   uint16 // the reference the parts share (8 or 16 bits)
	Total byte
	Seq   byte // 1..Total
	Data  []byte
}

// PartOf reads the concatenation of a submit_sm or deliver_sm: from its
// user data header (esm_class ESMClassUDHI; IEI 0x00 or 0x08) or from its
// sar_* TLVs. ok is false for a message that is not a part. A part whose
// header holds another element besides the concatenation (a national
// language shift, a port, ...) is an error: Part carries only the data,
// and the element would be lost (the text read with the wrong alphabet,
// the port dropped).
func PartOf(s *SM) (p Part, ok bool, err error) {
	payload := s.Payload()
	if s.ESMClass&ESMClassUDHI != 0 {
		if len(payload) == 0 {
			return Part{}, false, fmt.Errorf("esm_class says a user data header, but the message is empty")
		}
		hl := int(payload[0])
		if hl+1 > len(payload) {
			return Part{}, false, fmt.Errorf("user data header of %d octets in a message of %d", hl, len(payload)-1)
		}
		udh, data := payload[1:hl+1], payload[hl+1:]
		other := -1 // the first element that is not the concatenation
		for i := 0; i < len(udh); {
			if i+2 > len(udh) {
				return Part{}, false, fmt.Errorf("user data header element cut off at octet %d", i)
			}
			iei, n := udh[i], int(udh[i+1])
			if i+2+n > len(udh) {
				return Part{}, false, fmt.Errorf("user data header element 0x%02X of %d octets runs past the header", iei, n)
			}
			v := udh[i+2 : i+2+n]
			switch {
			case iei == 0x00 && n == 3:
				p = Part{Ref: uint16(v[0]), Total: v[1], Seq: v[2]}
				ok = true
			case iei == 0x08 && n == 4:
				p = Part{Ref: uint16(v[0])<<8 | uint16(v[1]), Total: v[2], Seq: v[3]}
				ok = true
			case other < 0:
				other = int(iei)
			}
			i += 2 + n
		}
		if !ok {
			return Part{}, false, nil
		}
		if other >= 0 {
			return Part{}, false, fmt.Errorf("element 0x%02X beside the concatenation is not carried (its message would lose it)", other)
		}
		p.Data = data
	} else {
		ref, hasRef := s.TLVs.Uint(TagSARMsgRefNum)
		total, hasTotal := s.TLVs.Uint(TagSARTotalSegments)
		seq, hasSeq := s.TLVs.Uint(TagSARSegmentSeqnum)
		if !hasRef && !hasTotal && !hasSeq {
			return Part{}, false, nil
		}
		if !hasRef || !hasTotal || !hasSeq {
			return Part{}, false, fmt.Errorf("sar_msg_ref_num, sar_total_segments and sar_segment_seqnum go together")
		}
		p = Part{Ref: uint16(ref), Total: byte(total), Seq: byte(seq), Data: payload}
	}
	if p.Total == 0 || p.Seq == 0 || p.Seq > p.Total {
		return Part{}, false, fmt.Errorf("part %d of %d", p.Seq, p.Total)
	}
	return p, true, nil
}
