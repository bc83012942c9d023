package smpp

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/switchboard-dev/switchboard/gsm7"
	"github.com/switchboard-dev/switchboard/messages"
)

// The data_coding values of the codings (SMPP v3.4 section 5.2.19).
const (
	DCDefault = 0x00 // SMSC default alphabet: GSM 7-bit here
	DCIA5     = 0x01 // IA5 (ASCII)
	DCBinary2 = 0x02 // octet unspecified (8-bit binary)
	DCLatin1  = 0x03 // ISO-8859-1
	DCBinary  = 0x04 // octet unspecified (8-bit binary)
	DCUCS2    = 0x08 // UCS-2 (big endian)
)

// The codings that carry a message class (GSM 03.38, section 4), its
// number in bits 1-0:
//   - "data coding/message class", 1111xxxx: bit 3 is reserved (0xF8-0xFF
//     are not read), bit 2 says 8-bit data, else GSM 7-bit;
//   - "general data coding" uncompressed with a class, 0001xxxx: bits 3-2
//     are the alphabet, 00 GSM 7-bit, 01 8-bit data, 10 UCS-2 (11,
//     0x1C-0x1F, is reserved and not read).
//
// The general group is the only one that gives UCS-2 a class.
const (
	dcClassMask    = 0xF8
	dcClassBit     = 0xF0
	dcClass8Bit    = 0x04
	dcGeneralMask  = 0xF0
	dcGeneralClass = 0x10
	dcGeneralUCS2  = 0x18
	dcAlphabet     = 0x0C
	dcClassNumber  = 0x03
)

// DataCodingOf is the data_coding of a message's coding ("" is sent as
// GSM 7-bit when its text fits that alphabet, else UCS-2: see EncodeContent)
// and message class: without a class 0x00, 0x08 or 0x04; with one GSM 7-bit
// 0xF0|class, 8-bit binary 0xF4|class, UCS-2 0x18|class.
func DataCodingOf(c messages.DataCoding, class *int) byte {
	if class == nil {
		switch c {
		case messages.CodingUCS2:
			return DCUCS2
		case messages.CodingBinary:
			return DCBinary
		}
		return DCDefault
	}
	n := byte(*class) & dcClassNumber
	switch c {
	case messages.CodingUCS2:
		return dcGeneralUCS2 | n
	case messages.CodingBinary:
		return dcClassBit | dcClass8Bit | n
	}
	return dcClassBit | n
}

// ClassOf is the message class data_coding dc carries (0xF0-0xF7 and
// 0x10-0x1B), or nil when it carries none.
func ClassOf(dc byte) *int {
	if dc&dcClassMask != dcClassBit && !generalWithClass(dc) {
		return nil
	}
	return messages.Class(int(dc & dcClassNumber))
}

// ClassOfSubunit is the message class a dest_addr_subunit asks for (SMPP
// v3.4 section 5.3.2.1, the ESME's other way to ask for one): 1, the MS
// display, is class 0 (flash); 2, the mobile equipment, class 1; 3, the
// SIM, class 2; 4, an external unit, class 3; 0 (unknown) none. ok is
// false for the reserved values 5-255.
func ClassOfSubunit(v byte) (class *int, ok bool) {
	switch {
	case v == 0:
		return nil, true
	case v <= 4:
		return messages.Class(int(v) - 1), true
	}
	return nil, false
}

// generalWithClass reports whether dc is a general data coding with a
// message class and an alphabet this node reads (0x10-0x1B).
func generalWithClass(dc byte) bool {
	return dc&dcGeneralMask == dcGeneralClass && dc&dcAlphabet != dcAlphabet
}

// alphabetOf is the data_coding without a class of dc's alphabet when dc
// carries a class (0xF0-0xF7, 0x10-0x1B), else dc itself.
func alphabetOf(dc byte) byte {
	switch {
	case dc&dcClassMask == dcClassBit && dc&dcClass8Bit != 0:
		return DCBinary
	case dc&dcClassMask == dcClassBit:
		return DCDefault
	case generalWithClass(dc):
		return [...]byte{DCDefault, DCBinary, DCUCS2}[(dc&dcAlphabet)>>2]
	}
	return dc
}

// EncodeContent returns a message's content as the octets of its data_coding:
// GSM 7-bit septets (unpacked, one per octet), UCS-2 (UTF-16 big endian; a
// character outside the Basic Multilingual Plane takes a surrogate pair,
// as handsets read it), or the binary body as it is. A message without a
// coding goes as GSM 7-bit when its text fits that alphabet, else UCS-2;
// the coding used is returned.
func EncodeContent(c messages.DataCoding, text string, bin []byte) ([]byte, messages.DataCoding, error) {
	if c == "" {
		c = messages.CodingUCS2
		if bin == nil && gsm7.Septets(text) >= 0 {
			c = messages.CodingGSM7
		}
	}
	switch c {
	case messages.CodingGSM7:
		b, err := gsm7.Encode(text)
		return b, c, err
	case messages.CodingUCS2:
		u := utf16.Encode([]rune(text))
		b := make([]byte, 0, 2*len(u))
		for _, v := range u {
			b = append(b, byte(v>>8), byte(v))
		}
		return b, c, nil
	case messages.CodingBinary:
		if bin == nil {
			return nil, c, fmt.Errorf("a binary message without its bytes")
		}
		return bin, c, nil
	}
	return nil, c, fmt.Errorf("data coding %q is not gsm7, ucs2 or binary", c)
}

// DecodeContent reads a message's content of data_coding dc: the text of a text
// coding (with the coding it maps to: gsm7, ucs2, or "" for IA5 and
// Latin-1, which carry text without a coding of ours), or the bytes of a
// binary one. A coding with a message class is read as its alphabet (its
// class is ClassOf's). An unknown data_coding is an error (answer
// ESME_RINVDCS-like refusals with StatusSubmitFailed).
func DecodeContent(dc byte, b []byte) (text string, bin []byte, c messages.DataCoding, err error) {
	read := dc
	switch dc = alphabetOf(dc); {
	case dc == DCDefault:
		text, err = gsm7.Decode(b)
		return text, nil, messages.CodingGSM7, err
	case dc == DCIA5:
		for i, v := range b {
			if v > 0x7F {
				return "", nil, "", fmt.Errorf("octet %d (0x%02X) is not IA5", i, v)
			}
		}
		return string(b), nil, "", nil
	case dc == DCLatin1:
		r := make([]byte, 0, len(b)+len(b)/2)
		for _, v := range b {
			r = utf8.AppendRune(r, rune(v))
		}
		return string(r), nil, "", nil
	case dc == DCUCS2:
		if len(b)%2 != 0 {
			return "", nil, "", fmt.Errorf("UCS-2 of %d octets (not whole characters)", len(b))
		}
		u := make([]uint16, len(b)/2)
		for i := range u {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		}
		// By the units, not the runes utf16.Decode makes: it reads an
		// unpaired surrogate as U+FFFD, a character a sender may send.
		for i, v := range u {
			if (isHighSurrogate(v) && (i+1 == len(u) || !isLowSurrogate(u[i+1]))) ||
				(isLowSurrogate(v) && (i == 0 || !isHighSurrogate(u[i-1]))) {
				return "", nil, "", fmt.Errorf("UCS-2 character %d is an unpaired surrogate", i)
			}
		}
		return string(utf16.Decode(u)), nil, messages.CodingUCS2, nil
	case dc == DCBinary || dc == DCBinary2:
		return "", append([]byte(nil), b...), messages.CodingBinary, nil
	}
	return "", nil, "", fmt.Errorf("data_coding 0x%02X is not one this node reads (0x00, 0x01, 0x02, 0x03, 0x04, 0x08, 0x10-0x1B, 0xF0-0xF7)", read)
}

// isHighSurrogate and isLowSurrogate report whether a UTF-16 unit is the
// first or the second of a surrogate pair.
func isHighSurrogate(v uint16) bool { return v >= 0xD800 && v < 0xDC00 }
func isLowSurrogate(v uint16) bool  { return v >= 0xDC00 && v < 0xE000 }
