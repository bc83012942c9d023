package switchboard

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/httpapi/auth"
	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/smsc"
)

// The SMPP listener (SMPPListen; docs/smpp.md, "Inbound"): ESMEs bind
// with an SMPP account of the credentials and submit into the same
// intake as POST /api/messages; their receipts leave through the outbox.

// validateSMPP checks the listener's settings.
func (c Config) validateSMPP() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, field.Errorf(path, format, args...))
	}
	if c.SMPPListen != "" {
		if err := checkHostPort(c.SMPPListen, true); err != nil {
			bad("SMPPListen", "%v", err)
		}
		for _, l := range []struct{ path, addr string }{{"Listen", c.Listen}, {"MetricsListen", c.MetricsListen}} {
			if l.addr == c.SMPPListen && !hasPortZero(l.addr) {
				bad("SMPPListen", "%q is %s too; it needs an address of its own", c.SMPPListen, field.Ref(l.path))
			}
		}
	}
	if c.SMPPTLS && c.SMPPListen == "" {
		bad("SMPPTLS", "needs %s", field.Ref("SMPPListen"))
	}
	if c.SMPPWindow < 1 {
		bad("SMPPWindow", "must be at least 1, got %d", c.SMPPWindow)
	}
	if c.SMPPReceiptWait < 0 {
		bad("SMPPReceiptWait", "must not be negative, got %v", c.SMPPReceiptWait)
	}
	seen := map[string]bool{}
	for _, a := range c.SMPPAccounts {
		if err := a.Check(); err != nil {
			bad("SMPPAccounts", "%v", err)
		}
		if seen[a.SystemID] {
			bad("SMPPAccounts", "system_id %q given twice", a.SystemID)
		}
		seen[a.SystemID] = true
	}
	return errs
}

// Check reports why a is not an SMPP account: its system_id names a
// credential (messages.Credential's rules for an SMPP one) and its
// password is what a bind carries. The password is never shown.
func (a SMPPAccount) Check() error {
	switch {
	case !messages.ValidName(a.SystemID):
		return fmt.Errorf("system_id %q is not a valid name (1-63 letters, digits, '.', '_', '-')", a.SystemID)
	case len(a.SystemID) > messages.MaxSMPPSystemID:
		return fmt.Errorf("system_id %q: at most %d characters", a.SystemID, messages.MaxSMPPSystemID)
	case a.SystemID == messages.ReservedCredential:
		return fmt.Errorf("system_id %q is the --api-token credential's", a.SystemID)
	case a.Password == "" || len(a.Password) > messages.MaxSMPPPassword ||
		strings.ContainsFunc(a.Password, func(r rune) bool { return r <= ' ' || r > '~' }):
		return fmt.Errorf("system_id %q: the password must be 1-%d printable ASCII characters without blanks", a.SystemID, messages.MaxSMPPPassword)
	}
	return nil
}

// credential is a as a credential of the node's set.
func (a SMPPAccount) credential() messages.Credential {
	return messages.Credential{Name: a.SystemID, Role: messages.RoleClient, TokenHash: auth.Hash(a.Password), SMPP: true}
}

func hasPortZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// bindSMPP binds SMPPListen (before the store opens, like the other
// listeners, so that a port taken stops the start at once).
func (n *Node) bindSMPP() error {
	if n.cfg.SMPPListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.SMPPListen)
	if err != nil {
		return field.Wrap("SMPPListen", err)
	}
	n.smppLn = ln
	return nil
}

// startSMPP serves SMPPListen once the intake runs.
func (n *Node) startSMPP() error {
	ln := n.smppLn
	if ln == nil {
		return nil
	}
	n.smppLn = nil
	m, err := smsc.NewMetrics(n.metrics)
	if err != nil {
		ln.Close()
		return err
	}
	cfg := smsc.DefaultConfig()
	cfg.Listener, cfg.SystemID, cfg.Owner, cfg.Window = ln, n.cfg.Name, n.cfg.InstanceID, n.cfg.SMPPWindow
	cfg.Backend, cfg.Store, cfg.Metrics, cfg.Clock, cfg.Logger = n.gw, n.store, m, n.clock, n.log
	cfg.Tracing = n.tracing
	if n.cfg.SMPPTLS {
		tc, err := n.serverTLS()
		if err != nil {
			ln.Close()
			return err
		}
		cfg.TLS = tc
	}
	srv, err := smsc.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	n.smppIn = srv
	n.saddr = ln.Addr().String()
	go n.serve("smpp", srv.Serve)
	n.log.Info("smpp listener serves", "addr", n.saddr, "tls", n.cfg.SMPPTLS)
	return nil
}

// stopSMPP closes the listener: the submissions on their way get their
// commit and answer, then every session is unbound.
func (n *Node) stopSMPP(ctx context.Context) error {
	if n.smppLn != nil {
		n.smppLn.Close()
	}
	if n.smppIn == nil {
		return nil
	}
	if err := n.smppIn.Close(ctx); err != nil {
		return fmt.Errorf("smpp listener: %w", err)
	}
	return nil
}

// kickReceipts wakes the receipt senders when a message becomes final.
func (n *Node) kickReceipts(ev messages.StateChanged) {
	if n.smppIn != nil && ev.State.Final() {
		n.smppIn.Kick()
	}
}

// SMPPAddr is the SMPP listener's address once started ("" when none).
func (n *Node) SMPPAddr() string { return n.saddr }
