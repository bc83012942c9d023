package messages

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Role is what a credential may do on the API (docs/api.md, "Roles").
// Not to be confused with a ring role (RoleMaster, RoleSlave): those name
// an instance's place in its site.
type Role string

// The roles of credentials.
const (
	// RoleAdmin may do everything: the directory (routes, frontends),
	// resubmits, submits, polls and acks of every frontend, the audit trail.
	RoleAdmin Role = "admin"
	// RoleOperator reads everything and resubmits; it changes no route,
	// frontend or credential and submits nothing.
	RoleOperator Role = "operator"
	// RoleClient submits messages and reads the messages it submitted.
	RoleClient Role = "client"
	// RoleFrontend polls, acks and registers only the frontends its
	// credential is bound to.
	RoleFrontend Role = "frontend"
)

// AllRoles lists the roles, widest first.
var AllRoles = []Role{RoleAdmin, RoleOperator, RoleClient, RoleFrontend}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(AllRoles, r) }

// Credential is a named API token with a role. The token itself is never
// stored: TokenHash is the hex SHA-256 of it (a random token of 256 bits
// needs no slow hash, and a lookup by hash costs one map access).
type Credential struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// TokenHash is the lower-case hex SHA-256 of the token.
	TokenHash string `json:"token_sha256"`
	// Frontends are the frontends a frontend credential may poll, ack and
	// register (empty for the other roles).
	Frontends []string `json:"frontends,omitempty"`
	// SubmitRate, when positive, bounds a client credential's submits per
	// second (429 rate_limited beyond it); 0 is no bound.
	SubmitRate float64 `json:"submit_rate,omitempty"`
	// SMPP marks an SMPP account (docs/smpp.md, "Accounts"): an ESME
	// binds with the credential's name as its system_id and its token as
	// its password, which SMPP v3.4 bounds to 8 characters. Such a short
	// secret opens nothing else: the HTTP API never accepts it as a token.
	// An SMPP account is a client credential (it submits and reads its own
	// messages; its submit rate bounds its submit_sm too) whose name fits a
	// system_id (MaxSMPPSystemID).
	SMPP bool `json:"smpp,omitempty"`
	// CreatedAt is when the credential was added.
	CreatedAt time.Time `json:"created_at"`
}

// ReservedCredential is the name of the --api-token credential: no stored
// credential may take it.
const ReservedCredential = "api-token"

// MaxSubmitRate bounds SubmitRate (per second): far above what one node
// ingests, so a bound above it is a typo.
const MaxSubmitRate = 1_000_000

// Validate reports every problem of c, naming the credential.
func (c Credential) Validate() error {
	var probs []string
	if !ValidName(c.Name) {
		probs = append(probs, "name: 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit")
	} else if c.Name == ReservedCredential {
		probs = append(probs, fmt.Sprintf("name %q is the --api-token credential's", ReservedCredential))
	}
	if !c.Role.Valid() {
		probs = append(probs, fmt.Sprintf("role %q: want one of admin, operator, client, frontend", c.Role))
	}
	if b, err := hex.DecodeString(c.TokenHash); err != nil || len(b) != 32 || strings.ToLower(c.TokenHash) != c.TokenHash {
		probs = append(probs, "token_sha256: the lower-case hex SHA-256 of the token (64 characters)")
	}
	switch {
	case c.Role == RoleFrontend && len(c.Frontends) == 0:
		probs = append(probs, "frontends: a frontend credential must be bound to at least one frontend")
	case c.Role != RoleFrontend && len(c.Frontends) > 0:
		probs = append(probs, "frontends: only a frontend credential is bound to frontends")
	}
	for _, f := range c.Frontends {
		if !ValidName(f) {
			probs = append(probs, fmt.Sprintf("frontends: %q is not a frontend name", f))
		}
	}
	switch {
	case c.SubmitRate < 0 || c.SubmitRate > MaxSubmitRate || c.SubmitRate != c.SubmitRate:
		probs = append(probs, fmt.Sprintf("submit_rate: from 0 (no bound) to %d per second", MaxSubmitRate))
	case c.SubmitRate > 0 && c.Role != RoleClient:
		probs = append(probs, "submit_rate: only a client credential has a submit rate")
	}
	if c.SMPP && c.Role != RoleClient {
		probs = append(probs, "smpp: an SMPP account is a client credential (it submits)")
	}
	if c.SMPP && len(c.Name) > MaxSMPPSystemID {
		probs = append(probs, fmt.Sprintf("smpp: the name is the account's system_id: at most %d characters", MaxSMPPSystemID))
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("credential %q: %s", c.Name, strings.Join(probs, "; "))
}

// AuditEntry is one change of state made by a person or a tool: who
// (the credential's name and role), what (an action on a target, with
// detail), when and from where (the caller's address, or the tool).
type AuditEntry struct {
	// Seq orders the trail within one store (the list's cursor).
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Actor is the credential's name ("anonymous" on a node without
	// credentials; a tool names itself, e.g. "cli:root@host").
	Actor string `json:"actor"`
	// Role is the actor's role ("" for a tool outside the API).
	Role Role `json:"role,omitempty"`
	// Remote is where the change came from: the caller's address, or the
	// file or command that made it.
	Remote string `json:"remote"`
	// Action is what was done (AuditActions).
	Action string `json:"action"`
	// Target names what it was done to: a message id, a route prefix, a
	// frontend or credential name, a state for a bulk resubmit.
	Target string `json:"target"`
	// Detail says more: the new value, how many messages a bulk
	// resubmit moved.
	Detail string `json:"detail,omitempty"`
}

// The actions of the audit trail.
const (
	AuditResubmit         = "message.resubmit"
	AuditResubmitBulk     = "message.resubmit_bulk"
	AuditRoutePut         = "route.put"
	AuditRouteDelete      = "route.delete"
	AuditFrontendPut      = "frontend.put"
	AuditFrontendDelete   = "frontend.delete"
	AuditCredentialAdd    = "credential.add"
	AuditCredentialRevoke = "credential.revoke"
	AuditTLSReload        = "tls.reload"
)

// AuditActions lists every action, for validation and the API's filter.
var AuditActions = []string{AuditResubmit, AuditResubmitBulk, AuditRoutePut, AuditRouteDelete,
	AuditFrontendPut, AuditFrontendDelete, AuditCredentialAdd, AuditCredentialRevoke, AuditTLSReload}

// Limits of an audit entry's texts, in bytes.
const (
	MaxAuditActor  = 128
	MaxAuditRemote = 256
	MaxAuditTarget = 256
	MaxAuditDetail = 1024
)
