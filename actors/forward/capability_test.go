package forward

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// TestMessageClassOnlyToPeersAnnouncingIt: a message with a message class
// is forwarded, class and all, only to a peer announcing message_class
// (and message_fields); to one announcing message_fields alone it is not
// sent and its result is capability_missing naming message_class (the
// peer would ignore the field and deliver it without its class), while a
// message with a data coding still goes. A peer without message_fields gets neither.
func TestMessageClassOnlyToPeersAnnouncingIt(t *testing.T) {
	classed := messages.Message{ID: "classed", Options: messages.Options{MessageClass: messages.Class(0)}}
	coded := messages.Message{ID: "coded", Options: messages.Options{DataCoding: messages.CodingGSM7}}
	work := []persistence.Work{{MessageID: "classed", Message: classed}, {MessageID: "coded", Message: coded}}
	for _, c := range []struct {
		name         string
		link         messages.PeerLink
		sent         string
		missingClass string // the capability the classed message's error names
		missingCoded string
	}{
		{"both", messages.PeerLink{MessageFields: true, MessageClass: true}, "classed coded", "", ""},
		{"message_fields alone", messages.PeerLink{MessageFields: true}, "coded", messages.CapMessageClass, ""},
		{"neither", messages.PeerLink{}, "", messages.CapMessageFields, messages.CapMessageFields},
	} {
		tr := &recordingTransport{}
		res, err := sendForwards(context.Background(), tr, "b", c.link, work, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sent []string
		for _, f := range tr.got {
			sent = append(sent, f.ID)
			if f.ID == "classed" && (f.MessageClass == nil || *f.MessageClass != 0) {
				t.Errorf("%s: the forward carries message_class %v, want 0", c.name, f.MessageClass)
			}
		}
		if got := strings.Join(sent, " "); got != c.sent {
			t.Errorf("%s: sent %q, want %q", c.name, got, c.sent)
		}
		for i, missing := range []string{c.missingClass, c.missingCoded} {
			e := res[i].Error
			switch {
			case missing == "" && e != nil:
				t.Errorf("%s: %s: error %v", c.name, res[i].ID, e)
			case missing != "" && (e == nil || e.Code != messages.CodeCapabilityMissing || !strings.Contains(e.Message, missing)):
				t.Errorf("%s: %s: error %v, want %s naming %s", c.name, res[i].ID, e, messages.CodeCapabilityMissing, missing)
			}
		}
	}
}
