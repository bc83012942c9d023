package switchboard

import (
	"github.com/switchboard-dev/switchboard/actors/bus"
	"github.com/switchboard-dev/switchboard/actors/intake"
	"github.com/switchboard-dev/switchboard/field"
)

// The delivery bus (NatsURL, docs/nats.md): the relay publishes the
// outbox's delivery work to a JetStream work-queue stream and the delivery
// workers take it from one durable consumer per frontend, shared by the
// site's instances. Without NatsURL nothing of it runs.

// validateBus checks the bus settings: the bus carries the work of a site
// that shares one store, so the embedded store refuses it.
func (c Config) validateBus() []error {
	if c.NatsURL == "" {
		for _, f := range []struct{ path, v string }{{"NatsCreds", c.NatsCreds}, {"NatsStream", c.NatsStream}, {"NatsStorage", c.NatsStorage}} {
			if f.v != "" {
				return []error{field.Errorf(f.path, "given without %s", field.Ref("NatsURL"))}
			}
		}
		return nil
	}
	if c.Postgres == "" && c.Store == nil {
		return []error{field.Errorf("NatsURL", "the delivery bus needs the shared store (%s); the embedded store serves a single instance",
			field.Ref("Postgres"))}
	}
	if err := c.busConfig(nil).Validate(); err != nil {
		return []error{field.Rename(err, busFields)}
	}
	return nil
}

// busFields names the node's field that busConfig fills each of the bus's
// fields from, for the bus's errors.
var busFields = field.Map(map[string]string{
	"URL": "NatsURL", "Creds": "NatsCreds", "Stream": "NatsStream", "Storage": "NatsStorage",
	"TLSCA": "TLSCA", "TLSCert": "TLSCert", "TLSKey": "TLSKey", "Name": "InstanceID",
})

// busConfig is the bus's configuration from the node's.
func (c Config) busConfig(n *Node) bus.Config {
	bc := bus.DefaultConfig()
	bc.URL, bc.Creds, bc.Stream, bc.Name, bc.Site = c.NatsURL, c.NatsCreds, c.NatsStream, c.InstanceID, c.Name
	if bc.Stream == "" {
		bc.Stream = bus.StreamName(c.Name)
	}
	if c.NatsStorage != "" {
		bc.Storage = c.NatsStorage
	}
	bc.TLSCA, bc.TLSCert, bc.TLSKey = c.TLSCA, c.TLSCert, c.TLSKey
	if n != nil {
		bc.Logger = n.log
	}
	return bc
}

// startBus connects to the bus and starts the relay (before the workers,
// which take from it). A bus that is down at start is waited for in the
// background: the node starts and delivers from the store meanwhile.
func (n *Node) startBus() error {
	if n.cfg.NatsURL == "" {
		return nil
	}
	m, err := bus.NewMetrics(n.metrics, siteLabels(n.cfg.Name))
	if err != nil {
		return err
	}
	b, err := bus.Open(n.cfg.busConfig(n), m, &n.workers)
	if err != nil {
		return field.Rename(err, busFields)
	}
	n.bus.Store(b)
	n.relay = bus.StartRelay(b, n.store, n.clock, uint64(n.clock.Now().UnixNano()))
	return nil
}

// intakeRelay is the relay the intake publishes its new delivery work
// through; nil without the bus (a nil *bus.Relayer in the interface would
// not be nil).
func (n *Node) intakeRelay() intake.Relay {
	if n.relay == nil {
		return nil
	}
	return n.relay
}

// stopBus stops the relay and disconnects (after the workers stopped).
func (n *Node) stopBus() {
	n.workers.pid.Store(nil) // stopped: the bus's last changes kick nobody
	if n.relay != nil {
		n.relay.Stop()
		n.relay = nil
	}
	if b := n.bus.Swap(nil); b != nil {
		b.Close()
	}
}

// BusState is the bus's state for /readyz and /api/status: "off" without
// NatsURL, else "up" or "down" (with why).
func (n *Node) BusState() (state, why string) {
	b := n.bus.Load()
	if b == nil {
		return "off", ""
	}
	return b.State()
}
