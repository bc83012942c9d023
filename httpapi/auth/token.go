package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// TokenPrefix starts every token this package makes.
const TokenPrefix = "sbt_"

// NewToken returns a fresh random token and its hash (the stored form).
func NewToken() (token, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, Hash(token)
}

// Hash is the stored form of a token: its SHA-256 in lower-case hex.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenRule is what ValidToken takes, as an error says it.
const TokenRule = "16-512 printable ASCII characters without blanks"

// ValidToken reports whether a token given to the node (--api-token, a
// file's) can be sent in an Authorization header: printable ASCII without
// blanks, 16 to 512 characters (TokenRule).
func ValidToken(t string) bool {
	return len(t) >= 16 && len(t) <= 512 && !strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > '~' })
}

// SMPPPasswordLen is the length of the passwords NewSMPPPassword makes:
// the most SMPP v3.4 allows (password is a C-Octet string of 9 octets).
const SMPPPasswordLen = 8

// smppAlphabet holds the characters of an SMPP password: letters and
// digits, which every ESME's configuration takes as they are.
const smppAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewSMPPPassword returns a fresh random SMPP account password of
// SMPPPasswordLen letters and digits (about 47 bits) and its hash.
func NewSMPPPassword() (password, hash string) {
	b := make([]byte, SMPPPasswordLen)
	for i := range b {
		var r [1]byte
		for {
			_, _ = rand.Read(r[:]) // never fails (Go 1.24+)
			if int(r[0]) < 256-256%len(smppAlphabet) {
				break // no modulo bias
			}
		}
		b[i] = smppAlphabet[int(r[0])%len(smppAlphabet)]
	}
	return string(b), Hash(string(b))
}
