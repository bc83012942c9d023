package messages

import (
	"errors"
	"fmt"
)

// Error is a failure a client can act on. Code is the snake_case code of the
// JSON error document; httpapi maps each code to one HTTP status.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the submission field a refusal of its time is about
	// (FieldValidityUntil, FieldDeliverAfter), for a caller that answers
	// by it (the SMPP listener: ESME_RINVEXPIRY, ESME_RINVSCHED); empty
	// otherwise. It is not part of the JSON error document.
	Field string `json:"-"`
}

// The fields an Error of the times names (Error.Field).
const (
	FieldValidityUntil = "validity_until"
	FieldDeliverAfter  = "deliver_after"
)

// timeError is a refusal of field's time.
func timeError(field, format string, args ...any) *Error {
	e := Errorf(CodeInvalidRequest, format, args...)
	e.Field = field
	return e
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrNotReadBack wraps the error of a change that was made, but whose
// result could not be read back (a route or frontend put, a resubmit):
// its caller is answered the error, and the change is recorded as made
// (the audit trail).
var ErrNotReadBack = errors.New("the change was made, but reading it back failed")

// Malformed reports whether err refuses a request as malformed: not the
// JSON expected, a field unknown, missing or of a bad value (httpapi
// answers each such code 400). A submit refused so uses none of its
// submitter's rate, on the API and on SMPP alike.
func Malformed(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeInvalidRequest, CodeInvalidJSON, CodeUnknownField, CodeRingBadJoin:
		return true
	}
	return false
}

// Error codes of the API. The HTTP status of each is in httpapi.
const (
	CodeInvalidRequest  = "invalid_request"    // a field is missing or malformed
	CodeInvalidJSON     = "invalid_json"       // the body is not the JSON expected
	CodeUnknownField    = "unknown_field"      // a client or directory body names a field the API does not know
	CodeIDConflict      = "id_conflict"        // a submission reuses a stored id with other content
	CodeBodyTooLarge    = "body_too_large"     // over the 1 MiB limit
	CodeUnauthorized    = "unauthorized"       // missing or wrong API token
	CodeForbidden       = "forbidden"          // the credential's role (or binding) does not allow the call
	CodeCrossOrigin     = "cross_origin"       // a browser's write from a page of another origin (CSRF)
	CodeRateLimited     = "rate_limited"       // a client credential's submit rate is used up: retry later
	CodeNotFound        = "not_found"          // the path names nothing that exists
	CodeMethodNotAllow  = "method_not_allowed" // the path exists, the method does not
	CodeNoRoute         = "no_route"           // no route (or no frontend) for a destination
	CodeUnknownFrontend = "unknown_frontend"   // a route names a frontend nobody serves
	CodeInvalidState    = "invalid_state"      // e.g. resubmit of a message that is not failed
	CodeNotPull         = "not_pull_frontend"  // poll/ack on a frontend that is not pull
	CodeFrontendInUse   = "frontend_in_use"    // delete of a frontend that routes still name
	CodeOverloaded      = "overloaded"         // admission control: retry later
	CodeUnavailable     = "unavailable"        // store unreachable or node stopping
	CodeStorageFull     = "storage_full"       // the store has no room for new work: retry later
	CodeInternal        = "internal"           // a bug: logged with detail

	// CodeSiteCapability: a message needs a capability (Options.Needs)
	// that an instance of this site does not announce to its ring (one of
	// an earlier version, in a rolling upgrade), which could claim it and
	// deliver it without the field. Retry once the site is upgraded.
	CodeSiteCapability = "site_capability_missing"

	// Federation.
	CodeFederationOff  = "federation_disabled"         // --federation=false: no peer is served
	CodeUnknownPeer    = "unknown_peer"                // X-Federation-Node names no discovered peer
	CodeNodeMismatch   = "node_mismatch"               // X-Federation-Node differs from the certificate or the body's node
	CodeClientCertReq  = "client_certificate_required" // mutual TLS: no verified client certificate
	CodeNotOurFrontend = "unknown_frontend_here"       // a forward names a frontend this node does not serve
	CodeMisdirected    = "misdirected"                 // X-Federation-To names another node: the caller's address is stale
	// CodeCapabilityMissing is never an HTTP answer: the result of a
	// forward the origin did not send, the peer lacking a capability the
	// message needs (CapMessageFields).
	CodeCapabilityMissing = "capability_missing"
)

// Ring (multi-instance sites, /api/ring/...).
const (
	CodeRingBadJoin       = "ring_bad_join"            // a join document misses a field or names an unknown service
	CodeRingNodeMismatch  = "ring_node_mismatch"       // the joining instance has another --name: not the same site
	CodeRingCluster       = "ring_cluster_mismatch"    // another --cluster than the master's
	CodeRingRegion        = "ring_region_mismatch"     // another --region than the master's
	CodeRingServices      = "ring_services_not_subset" // --ring-services names a service the master lacks
	CodeRingNotMaster     = "ring_not_master"          // this instance is not the ring master (now)
	CodeRingUnknownMember = "ring_unknown_member"      // a poll from an instance that is not (or no longer) a member: join again
	CodeRingDuplicate     = "ring_duplicate_instance"  // a member with this instance id is subscribed from another address
)
