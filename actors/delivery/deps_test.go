package delivery

import (
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/messages"
)

// TestDispatcherConfig: a push frontend has MaxInFlight deliveries under
// way, an smpp frontend no more than its SMSC's window (claimed beyond it,
// a message would wait for a slot on its lease); a pull frontend is one.
func TestDispatcherConfig(t *testing.T) {
	d := (&Deps{Owner: "me", SendTimeout: 10 * time.Second}).withDefaults()
	cases := []struct {
		fe       messages.Frontend
		pull     bool
		inFlight int
	}{
		{fe: messages.Frontend{Name: "w", Mode: messages.ModeWebhook, URL: "https://fe.example/in"}, inFlight: DefaultMaxInFlight},
		{fe: messages.Frontend{Name: "p", Mode: messages.ModePull}, pull: true, inFlight: DefaultMaxInFlight},
		{fe: messages.Frontend{Name: "s", Mode: messages.ModeSMPP, URL: "smpp://sys@smsc.example:2775?window=4"}, inFlight: 4},
		{fe: messages.Frontend{Name: "d", Mode: messages.ModeSMPP, URL: "smpp://sys@smsc.example:2775"}, inFlight: messages.DefaultSMPPWindow},
	}
	for _, c := range cases {
		cfg := d.dispatcherConfig(c.fe)
		if cfg.Frontend != c.fe.Name || cfg.Pull != c.pull || cfg.MaxInFlight != c.inFlight || cfg.Owner != "me" ||
			cfg.MaxClaim != maxClaim || cfg.PushLease != d.pushLease() || cfg.Bus {
			t.Errorf("%s: %+v; want pull %v, %d in flight", c.fe.Mode, cfg, c.pull, c.inFlight)
		}
	}
}
