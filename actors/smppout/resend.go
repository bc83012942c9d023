package smppout

import (
	"fmt"
	"strings"

	"github.com/switchboard-dev/switchboard/messages"
)

// ResendNote is the history mark of an attempt that may send the message
// to the SMSC a second time: an earlier attempt left no verdict (the node
// stopped, or its lease ran out, while its submit_sm was outstanding), so
// the SMSC may have accepted it. attempt is this attempt's number, state
// the message's state when it was claimed, last its last history entry
// (nil when not read: it is read only for a message in retry). A message
// in retry whose last entry is the recorded failure of the attempt before
// this one is no resend; nor is one whose last entry is the deferral of
// this same attempt (claimed before and given back unsent) unless that
// deferral kept the mark (Submit): its claim was a resend too. After the
// deferral of another attempt (or one that names none), the claim that
// counted that attempt again left no verdict: a resend.
//
// The entry's fields tell which attempt it speaks for, whether it was a
// deferral and whether its claim was a resend (messages.HistoryEntry.
// Attempt, Deferrals, Resend); an entry written before they were kept
// (Attempt 0, Resend false) is read by its detail ("attempt n failed",
// "not attempted (attempt n given back)", the mark's "attempt n-1 left no
// recorded verdict"). An entry written since is marked a resend whenever
// its detail has the mark (both come from Submit's note), so the detail
// tells nothing more of it.
func ResendNote(attempt int, state messages.State, last *messages.HistoryEntry) string {
	if attempt <= 1 {
		return ""
	}
	if state == messages.StateRetry && last != nil && last.State == messages.StateRetry {
		failed, deferred := last.Deferrals == 0 && last.Attempt == attempt-1, last.Deferrals > 0 && last.Attempt == attempt
		if last.Attempt == 0 {
			failed = strings.HasPrefix(last.Detail, fmt.Sprintf("attempt %d failed", attempt-1))
			deferred = strings.HasPrefix(last.Detail, fmt.Sprintf("not attempted (attempt %d given back)", attempt))
		}
		if failed || deferred && !last.Resend && !strings.Contains(last.Detail, noVerdict(attempt-1)) {
			return ""
		}
	}
	return "resent: " + noVerdict(attempt-1) + ", so the SMSC may have the message twice"
}

// noVerdict is what the resend mark says of attempt: it left no verdict.
func noVerdict(attempt int) string {
	return fmt.Sprintf("attempt %d left no recorded verdict (the node stopped or its lease ran out with the submit_sm outstanding)", attempt)
}
