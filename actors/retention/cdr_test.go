package retention

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// A record's final_at is the message's last transition: receipts an SMSC
// sent after it (history entries in the same final state) are not one.
func TestRecordFinalAtSkipsReceipts(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	h := func(s messages.State, d time.Duration) messages.HistoryEntry {
		return messages.HistoryEntry{State: s, At: t0.Add(d)}
	}
	cases := []struct {
		name string
		hist []messages.HistoryEntry
		want time.Duration
	}{
		{"delivered", []messages.HistoryEntry{h(messages.StatePending, 0), h(messages.StateDelivered, time.Second)}, time.Second},
		{"receipts after", []messages.HistoryEntry{h(messages.StatePending, 0), h(messages.StateDelivered, time.Second),
			h(messages.StateDelivered, time.Minute), h(messages.StateDelivered, time.Hour)}, time.Second},
		{"retries", []messages.HistoryEntry{h(messages.StatePending, 0), h(messages.StateRetry, time.Second),
			h(messages.StateRetry, 2*time.Second), h(messages.StateFailed, 3*time.Second)}, 3 * time.Second},
	}
	for _, c := range cases {
		r := RecordOf("n", messages.Message{ID: "m", History: c.hist}, t0)
		if !r.FinalAt.Equal(t0.Add(c.want)) {
			t.Errorf("%s: final_at %v, want %v", c.name, r.FinalAt.Sub(t0), c.want)
		}
	}
}
