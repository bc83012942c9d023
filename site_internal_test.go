package switchboard

import (
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/actors/ring"
	"github.com/switchboard-dev/switchboard/clock"
	"github.com/switchboard-dev/switchboard/messages"
)

// TestSiteRefusalUnderAnOldMaster: under the assignment of a master of an
// earlier version no member carries capabilities, this instance among
// them; the refusal names the master's version as the cause, not this
// instance, which runs this version (before, it told the operator that
// a2 "does not announce capability message_class (an earlier
// version)", sending them to upgrade the wrong instance).
func TestSiteRefusalUnderAnOldMaster(t *testing.T) {
	clk := clock.Real{}
	n := &Node{cfg: Config{Name: "site-a", InstanceID: "a2", Postgres: "postgres://x"}, clock: clk, roster: ring.NewRoster(0)}
	n.roster.Apply([]messages.RingMember{{InstanceID: "a1"}, {InstanceID: "a2"}}, clk.Now())
	err := n.siteRefusal(messages.Options{MessageClass: messages.Class(0)}, messages.CodeSiteCapability)
	if err == nil || strings.Contains(err.Error(), "a2") || !strings.Contains(err.Error(), "master runs an earlier version") {
		t.Fatalf("refusal under an old master: %v; want one naming the master's version, not a2", err)
	}
}
