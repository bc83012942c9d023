// Package gsm7 is the GSM 03.38 default alphabet (3GPP TS 23.038): the
// 7-bit characters an SMS centre carries without switching to UCS-2, with
// its extension table (reached through the escape 0x1B).
//
// Septets here are unpacked: one septet per byte, as SMPP carries text of
// data_coding 0 (the SMSC packs them for the air interface itself).
package gsm7

import (
	"fmt"
	"unicode/utf8"
)

// Escape is the septet that switches the next one to the extension table.
const Escape = 0x1B

// basic is the default alphabet in septet order; position 0x1B is the
// escape, never a character.
const basic = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
	"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"

// extension maps the septets that follow an escape to their characters.
var extension = map[byte]rune{
	0x0A: '\f', 0x14: '^', 0x28: '{', 0x29: '}', 0x2F: '\\',
	0x3C: '[', 0x3D: '~', 0x3E: ']', 0x40: '|', 0x65: '€',
}

var (
	toRune [128]rune
	// fromRune maps a character to its septets: one, or the escape and one.
	fromRune = make(map[rune][]byte, 140)
)

func init() {
	i := 0
	for _, r := range basic {
		toRune[i] = r
		if i != Escape {
			fromRune[r] = []byte{byte(i)}
		}
		i++
	}
	if i != 128 {
		panic(fmt.Sprintf("gsm7: the basic table has %d characters, not 128", i))
	}
	for s, r := range extension {
		fromRune[r] = []byte{Escape, s}
	}
}

// Offending returns the first character of s outside the alphabet and its
// byte offset, or ok true when there is none.
func Offending(s string) (r rune, at int, ok bool) {
	for i, c := range s {
		if _, in := fromRune[c]; !in {
			return c, i, false
		}
	}
	return 0, 0, true
}

// Septets is how many septets s takes (an extension character takes two),
// or -1 when s holds a character outside the alphabet.
func Septets(s string) int {
	n := 0
	for _, c := range s {
		b, in := fromRune[c]
		if !in {
			return -1
		}
		n += len(b)
	}
	return n
}

// Encode returns s as unpacked septets, or an error naming the first
// character outside the alphabet.
func Encode(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i, c := range s {
		b, in := fromRune[c]
		if !in {
			return nil, fmt.Errorf("%q (%U) at byte %d is not in the GSM 7-bit alphabet", c, c, i)
		}
		out = append(out, b...)
	}
	return out, nil
}

// Decode returns the text of unpacked septets. A byte above 0x7F is not a
// septet; an escape followed by a septet the extension table does not hold
// reads as that septet's basic character (3GPP TS 23.038's rule for a
// receiver), and an escape at the end reads as nothing.
func Decode(b []byte) (string, error) {
	out := make([]byte, 0, len(b)+len(b)/2)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c > 0x7F {
			return "", fmt.Errorf("byte %d (0x%02X) is not a 7-bit septet", i, c)
		}
		if c == Escape {
			if i+1 == len(b) {
				break
			}
			i++
			n := b[i]
			if n > 0x7F {
				return "", fmt.Errorf("byte %d (0x%02X) is not a 7-bit septet", i, n)
			}
			if r, ok := extension[n]; ok {
				out = utf8.AppendRune(out, r)
				continue
			}
			c = n
			if c == Escape { // an escape of an escape: a space, as the table says
				out = append(out, ' ')
				continue
			}
		}
		out = utf8.AppendRune(out, toRune[c])
	}
	return string(out), nil
}
