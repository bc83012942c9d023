package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/supervision/logtest"
	"github.com/switchboard-dev/switchboard/transport"
)

// TestWriteErrorClientGone: an unexpected failure is logged as an error,
// unless the client had gone (its request's context ended), which is its
// doing and logged at debug only. Both answer 500 internal.
func TestWriteErrorClientGone(t *testing.T) {
	for _, gone := range []bool{false, true} {
		log, buf := logtest.New()
		ctx, cancel := context.WithCancel(context.Background())
		if gone {
			cancel()
		} else {
			defer cancel()
		}
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/federation/health", nil)
		w := httptest.NewRecorder()
		writeError(w, log, r, context.Canceled)
		if w.Code != http.StatusInternalServerError {
			t.Errorf("gone=%v: status %d, want 500", gone, w.Code)
		}
		failed, ended := buf.Records(t, "request failed"), buf.Records(t, "request ended by the client")
		switch {
		case gone && (len(failed) != 0 || len(ended) != 1 || ended[0]["level"] != "DEBUG"):
			t.Errorf("client gone: logged %v as errors and %v as ended, want one debug record", failed, ended)
		case !gone && (len(failed) != 1 || failed[0]["level"] != "ERROR" || len(ended) != 0):
			t.Errorf("client there: logged %v as errors and %v as ended, want one error record", failed, ended)
		}
	}
}

// TestKindOf: every code the API answers with, at the status it answers
// it with, and the statuses of pages that are no error document, make the
// kind their callers decide on. A code added to statusOf without a row
// here fails, so each new refusal is classified on purpose.
func TestKindOf(t *testing.T) {
	byCode := map[string]transport.Kind{
		messages.CodeInvalidRequest:    transport.Refused,
		messages.CodeInvalidJSON:       transport.Refused,
		messages.CodeUnknownField:      transport.Refused,
		messages.CodeIDConflict:        transport.Conflict,
		messages.CodeBodyTooLarge:      transport.Refused,
		messages.CodeUnauthorized:      transport.Forbidden,
		messages.CodeForbidden:         transport.Forbidden,
		messages.CodeCrossOrigin:       transport.Forbidden,
		messages.CodeRateLimited:       transport.Busy,
		messages.CodeNotFound:          transport.UnknownTarget,
		messages.CodeMethodNotAllow:    transport.UnknownTarget,
		messages.CodeNoRoute:           transport.Refused,
		messages.CodeUnknownFrontend:   transport.Refused,
		messages.CodeInvalidState:      transport.Conflict,
		messages.CodeNotPull:           transport.Conflict,
		messages.CodeFrontendInUse:     transport.Conflict,
		messages.CodeOverloaded:        transport.Busy,
		messages.CodeUnavailable:       transport.Unavailable,
		messages.CodeStorageFull:       transport.Busy,
		messages.CodeSiteCapability:    transport.Unavailable,
		messages.CodeInternal:          transport.ServerError,
		messages.CodeFederationOff:     transport.Forbidden,
		messages.CodeUnknownPeer:       transport.Forbidden,
		messages.CodeNodeMismatch:      transport.Forbidden,
		messages.CodeClientCertReq:     transport.Forbidden,
		messages.CodeNotOurFrontend:    transport.Refused,
		messages.CodeMisdirected:       transport.Unreachable,
		messages.CodeRingBadJoin:       transport.Refused,
		messages.CodeRingNodeMismatch:  transport.Forbidden,
		messages.CodeRingCluster:       transport.Forbidden,
		messages.CodeRingRegion:        transport.Forbidden,
		messages.CodeRingServices:      transport.Forbidden,
		messages.CodeRingNotMaster:     transport.NotMaster,
		messages.CodeRingUnknownMember: transport.NotMember,
		messages.CodeRingDuplicate:     transport.Conflict,
	}
	for code := range statusOf {
		want, ok := byCode[code]
		if !ok {
			t.Errorf("code %q (status %d) has no kind in this table", code, StatusOf(code))
			continue
		}
		if got := kindOf(StatusOf(code), code); got != want {
			t.Errorf("kindOf(%d, %q) = %v, want %v", StatusOf(code), code, got, want)
		}
	}
	// Pages that are no error document: a proxy's, an old node's.
	for status, want := range map[int]transport.Kind{
		http.StatusBadRequest: transport.Refused, http.StatusRequestTimeout: transport.Unreachable,
		http.StatusTeapot: transport.Refused, http.StatusTooManyRequests: transport.Busy, http.StatusMisdirectedRequest: transport.Unreachable,
		http.StatusBadGateway: transport.ServerError, http.StatusServiceUnavailable: transport.Unavailable,
		http.StatusGatewayTimeout: transport.ServerError, http.StatusInsufficientStorage: transport.Busy,
		http.StatusNotModified: transport.ServerError, http.StatusNotFound: transport.UnknownTarget,
	} {
		if got := kindOf(status, fmt.Sprintf("http_%d", status)); got != want {
			t.Errorf("kindOf(%d) of a page = %v, want %v", status, got, want)
		}
	}
}

// TestMalformedIsTheCodesOf400: messages.Malformed, which decides that a
// refused submit uses none of its rate (here and on SMPP), names exactly
// the codes answered 400, wrapped or not.
func TestMalformedIsTheCodesOf400(t *testing.T) {
	for code, status := range statusOf {
		err := fmt.Errorf("submit: %w", messages.Errorf(code, "refused"))
		if got := messages.Malformed(err); got != (status == http.StatusBadRequest) {
			t.Errorf("messages.Malformed(%q) = %v, but it is answered %d", code, got, status)
		}
	}
	if messages.Malformed(errors.New("invalid_request: not a messages.Error")) {
		t.Error("an error that is no *messages.Error is malformed")
	}
}

// TestKindOfErrors: KindOf reads the kind of a wrapped *CallError, and
// makes every other error a call that did not complete.
func TestKindOfErrors(t *testing.T) {
	ce := callError(http.StatusConflict, []byte(`{"error":{"code":"ring_not_master","message":"not me"}}`))
	for _, c := range []struct {
		err  error
		want transport.Kind
	}{
		{nil, transport.None},
		{fmt.Errorf("join: %w", ce), transport.NotMaster},
		{context.DeadlineExceeded, transport.Unreachable},
		{errors.New("connection refused"), transport.Unreachable},
	} {
		if got := transport.KindOf(c.err); got != c.want {
			t.Errorf("KindOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
