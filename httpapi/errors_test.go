package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-dev/switchboard/supervision/logtest"
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
