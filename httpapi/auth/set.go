package auth

import (
	"crypto/subtle"
	"slices"

	"github.com/switchboard-dev/switchboard/messages"
)

// Principal is who a call is made by: a credential's name, role, the
// frontends it is bound to and its submit rate.
type Principal struct {
	Name       string
	Role       messages.Role
	Frontends  []string
	SubmitRate float64
	// SMPP is set for an SMPP account (messages.Credential.SMPP).
	SMPP bool
}

// Anonymous is the caller on a node without any credential: everything is
// open to it, as the API was before credentials (the node warns at start).
var Anonymous = Principal{Name: "anonymous", Role: messages.RoleAdmin}

// Has reports whether p's role is one of roles.
func (p Principal) Has(roles []messages.Role) bool { return slices.Contains(roles, p.Role) }

// Bound reports whether p may act for frontend: an admin for every one, a
// frontend credential for those it is bound to.
func (p Principal) Bound(frontend string) bool {
	return p.Role == messages.RoleAdmin || (p.Role == messages.RoleFrontend && slices.Contains(p.Frontends, frontend))
}

// Set is an immutable set of credentials, looked up by token hash.
type Set struct {
	byHash map[string]messages.Credential
	byName map[string]messages.Credential
	// open is set when the set has no credential at all and none is
	// required (no --api-token, no --credentials, none stored).
	open bool
}

// NewSet builds a set from credentials, which must be valid (Validate)
// and unique by name and hash (a file's parse and a store guarantee it;
// a later duplicate is ignored). required says that a caller needs a
// credential even when there is none (a credentials file was given, or
// the store holds one): an empty set then lets nobody in.
func NewSet(creds []messages.Credential, required bool) *Set {
	s := &Set{byHash: make(map[string]messages.Credential, len(creds)), byName: make(map[string]messages.Credential, len(creds))}
	for _, c := range creds {
		_, dupName := s.byName[c.Name]
		_, dupHash := s.byHash[c.TokenHash]
		if dupName || dupHash {
			continue
		}
		s.byName[c.Name] = c
		// An SMPP account's password (8 characters at most) is too short
		// to stand as an API token: only Check (an SMPP bind) reads it.
		if !c.SMPP {
			s.byHash[c.TokenHash] = c
		}
	}
	s.open = len(s.byName) == 0 && !required
	return s
}

// Open reports whether the set lets anyone in (no credential required).
func (s *Set) Open() bool { return s.open }

// Len is the number of credentials.
func (s *Set) Len() int { return len(s.byName) }

// Authenticate returns who token belongs to.
func (s *Set) Authenticate(token string) (Principal, bool) {
	if s.open {
		return Anonymous, true
	}
	c, ok := s.byHash[Hash(token)]
	if !ok {
		return Principal{}, false
	}
	return principalOf(c), true
}

// Check verifies secret against the credential named name: the seam for
// protocols whose clients present a name and a password (an SMPP bind).
// The comparison takes the same time whatever matches.
func (s *Set) Check(name, secret string) (Principal, bool) {
	c, ok := s.byName[name]
	if !ok {
		return Principal{}, false
	}
	if subtle.ConstantTimeCompare([]byte(Hash(secret)), []byte(c.TokenHash)) != 1 {
		return Principal{}, false
	}
	return principalOf(c), true
}

// Names lists the credentials' names, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.byName))
	for n := range s.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Diff names the credentials of next that s lacks (added) and those of s
// that next lacks or holds with another token, role or binding (removed;
// a changed credential is both).
func (s *Set) Diff(next *Set) (added, removed []string) {
	for _, name := range next.Names() {
		if old, ok := s.byName[name]; !ok || !same(old, next.byName[name]) {
			added = append(added, name)
		}
	}
	for _, name := range s.Names() {
		if c, ok := next.byName[name]; !ok || !same(c, s.byName[name]) {
			removed = append(removed, name)
		}
	}
	return added, removed
}

func same(a, b messages.Credential) bool {
	return a.Role == b.Role && a.TokenHash == b.TokenHash && slices.Equal(a.Frontends, b.Frontends) && a.SubmitRate == b.SubmitRate &&
		a.SMPP == b.SMPP
}

// Credential returns the credential named name.
func (s *Set) Credential(name string) (messages.Credential, bool) {
	c, ok := s.byName[name]
	return c, ok
}

func principalOf(c messages.Credential) Principal {
	return Principal{Name: c.Name, Role: c.Role, Frontends: c.Frontends, SubmitRate: c.SubmitRate, SMPP: c.SMPP}
}
