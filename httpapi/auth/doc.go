// Package auth decides who may call the API: credentials (named random
// tokens with a role, stored as SHA-256 hashes), the credentials file,
// the lookup of a caller's token, and the per-credential submit rate.
//
// It is a pure core: no clock, no I/O but the parsing of bytes handed to
// it. The node loads credentials from the --credentials file or its store
// and hands them over as a Set; the gateway asks the Set who a token
// belongs to and checks the role each route needs (docs/api.md, "Roles").
//
// # Tokens
//
// A token is "sbt_" followed by 32 random bytes in unpadded base64url (47
// characters). Only its SHA-256 is kept: a random token of 256 bits needs
// no slow password hash, and the lookup is one map access on the hash.
// The prefix lets secret scanners recognise a leaked token.
//
// # The credentials file
//
//	{"credentials": [
//	  {"name": "ops", "role": "operator", "token_sha256": "9f86d0...", "created_at": "2026-05-01T12:00:00Z"},
//	  {"name": "uk-gw", "role": "frontend", "token_sha256": "...", "frontends": ["sms-uk"]},
//	  {"name": "shop", "role": "client", "token_sha256": "...", "submit_rate": 50}
//	]}
//
// Decoded strictly: an unknown field, a duplicate name or token, or an
// invalid credential refuses the whole file (the node then keeps the
// credentials it had). `switchboard credentials add|list|revoke` edits it.
//
// # A seam for other protocols
//
// Set.Check verifies a secret presented with a credential's name (an SMPP
// bind's system_id and password, say) against the same credentials, so
// that one revocation ends every way in.
package auth
