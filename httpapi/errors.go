package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/transport"
)

// statusOf is the one place where error codes become HTTP statuses.
var statusOf = map[string]int{
	messages.CodeInvalidRequest:  http.StatusBadRequest,
	messages.CodeInvalidJSON:     http.StatusBadRequest,
	messages.CodeUnknownField:    http.StatusBadRequest,
	messages.CodeIDConflict:      http.StatusConflict,
	messages.CodeBodyTooLarge:    http.StatusRequestEntityTooLarge,
	messages.CodeUnauthorized:    http.StatusUnauthorized,
	messages.CodeForbidden:       http.StatusForbidden,
	messages.CodeCrossOrigin:     http.StatusForbidden,
	messages.CodeRateLimited:     http.StatusTooManyRequests,
	messages.CodeNotFound:        http.StatusNotFound,
	messages.CodeMethodNotAllow:  http.StatusMethodNotAllowed,
	messages.CodeNoRoute:         http.StatusUnprocessableEntity,
	messages.CodeUnknownFrontend: http.StatusUnprocessableEntity,
	messages.CodeInvalidState:    http.StatusConflict,
	messages.CodeNotPull:         http.StatusConflict,
	messages.CodeFrontendInUse:   http.StatusConflict,
	messages.CodeOverloaded:      http.StatusTooManyRequests,
	messages.CodeUnavailable:     http.StatusServiceUnavailable,
	messages.CodeStorageFull:     http.StatusInsufficientStorage,
	messages.CodeInternal:        http.StatusInternalServerError,

	// Like unavailable: this site cannot take the message now, and will
	// once its instances are upgraded (not 409: nothing the client sent
	// conflicts with what the node holds).
	messages.CodeSiteCapability: http.StatusServiceUnavailable,

	// Federation. A refused caller is 403: it reached us and is not let in
	// (as who it claims to be, or at all); a peer's client counts 403 as a
	// refusal that repeating the same call does not cure (kindOf: Forbidden).
	messages.CodeFederationOff: http.StatusForbidden,
	messages.CodeUnknownPeer:   http.StatusForbidden,
	messages.CodeNodeMismatch:  http.StatusForbidden,
	// Not 401: a TLS client certificate is no HTTP authentication scheme,
	// so there is no WWW-Authenticate challenge to send.
	messages.CodeClientCertReq: http.StatusForbidden,
	// Like no_route: the request is well formed, the message cannot go.
	messages.CodeNotOurFrontend: http.StatusUnprocessableEntity,
	// 421 Misdirected Request: the call reached a node that is not the one
	// it is for (X-Federation-To); a peer's client counts it as the peer
	// not reached at that address (kindOf: Unreachable), never as an answer.
	messages.CodeMisdirected: http.StatusMisdirectedRequest,

	// Ring. A refused join is 403 (repeating it cannot succeed: the
	// instance's flags disagree with the master's); a call that reached an
	// instance that is not the master, or a poll from one that must join
	// again, is 409.
	messages.CodeRingBadJoin:       http.StatusBadRequest,
	messages.CodeRingNodeMismatch:  http.StatusForbidden,
	messages.CodeRingCluster:       http.StatusForbidden,
	messages.CodeRingRegion:        http.StatusForbidden,
	messages.CodeRingServices:      http.StatusForbidden,
	messages.CodeRingNotMaster:     http.StatusConflict,
	messages.CodeRingUnknownMember: http.StatusConflict,
	messages.CodeRingDuplicate:     http.StatusConflict,
}

// StatusOf is the HTTP status the API answers an error of code with (500
// for a code it does not know). The sim harness's network answers with it
// too.
func StatusOf(code string) int {
	if status, ok := statusOf[code]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// kindOf is the one place where an error answer of a peer (its status and
// the code of its error document, "http_<status>" when it had none)
// becomes the kind its callers decide on: the ring's codes by code, the
// rest by status.
func kindOf(status int, code string) transport.Kind {
	switch code {
	case messages.CodeRingNotMaster:
		return transport.NotMaster
	case messages.CodeRingUnknownMember:
		return transport.NotMember
	}
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusMisdirectedRequest:
		return transport.Unreachable
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return transport.Forbidden
	case status == http.StatusNotFound, status == http.StatusMethodNotAllowed:
		return transport.UnknownTarget
	case status == http.StatusConflict:
		return transport.Conflict
	case status == http.StatusTooManyRequests, status == http.StatusInsufficientStorage:
		return transport.Busy
	case status >= 400 && status < 500:
		return transport.Refused
	case status == http.StatusServiceUnavailable:
		return transport.Unavailable
	}
	return transport.ServerError
}

// errorDoc is the JSON error document of docs/api.md.
type errorDoc struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers with err as a JSON error document. An error that is
// not a *messages.Error is a bug or an unexpected failure: it is logged and
// answered 500 without its detail; but when the client has gone (the
// request's context ended: it gave up or hung up) the failure is its
// doing, logged at debug only, and the answer reaches nobody.
func writeError(w http.ResponseWriter, log *slog.Logger, r *http.Request, err error) {
	var e *messages.Error
	if !errors.As(err, &e) {
		if r.Context().Err() != nil {
			log.Debug("request ended by the client", "method", r.Method, "path", r.URL.Path, "err", err)
		} else {
			log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		e = messages.Errorf(messages.CodeInternal, "internal error")
	}
	status := StatusOf(e.Code)
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusInsufficientStorage:
		// Space comes back when the cleaner's next pass or an operator
		// frees it: not within a second.
		w.Header().Set("Retry-After", "5")
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ra.after.Seconds()))))
	}
	var doc errorDoc
	doc.Error.Code, doc.Error.Message = e.Code, e.Message
	writeJSON(w, status, doc)
}

// retryAfterError is an error whose answer tells when to retry
// (Retry-After, in whole seconds rounded up) when the code's usual second
// is not it: a client credential's submit rate.
type retryAfterError struct {
	err   *messages.Error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

func retryAfter(e *messages.Error, after time.Duration) error { return &retryAfterError{e, after} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
