package ring

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/switchboard-dev/switchboard/actors/discovery"
	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
)

// Settings are the ring settings an operator gives an instance, as they
// come, before anything starts: Check finds every mistake among them, and
// StartRole and MasterHostPort turn them into the Config of a coordinator.
// The node's Config carries them in its Ring* fields and maps the field
// names of Check's errors onto its own.
type Settings struct {
	// Role is master, slave, index or auto. index takes master on the
	// StatefulSet ordinal 0 and slave on any other (see Ordinal).
	Role string
	// InstanceID is this instance's id; with role index, the first place
	// its ordinal is read from.
	InstanceID string
	// Master is the master's URL for a slave: https://host:port, or
	// host:port.
	Master string
	// Cluster, Region and Zone place the instance (each empty or a valid
	// name).
	Cluster, Region, Zone string
	// Services are the kinds of work the instance does (messages.AllServices).
	Services []string
	// PublishInterval is how often the master republishes the assignment.
	PublishInterval time.Duration
	// Reconnect is a slave's patience with an unreachable master.
	Reconnect Reconnect
	// Shared is set when other instances may use the instance's store. A
	// store of one instance has no elector and no slave: its instance is
	// always its own master and runs every service.
	Shared bool
}

// Check reports every problem of s, each a *field.Error naming the
// field of Settings it is about (Reconnect's as Reconnect.<field>).
func (s Settings) Check() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, field.Errorf(path, format, args...))
	}
	switch s.Role {
	case messages.RoleMaster, messages.RoleAuto:
	case messages.RoleSlave, messages.RoleIndex:
		if !s.Shared {
			bad("Role", "%s needs %s: the embedded store serves a single instance, which is always its own master",
				s.Role, field.Ref("Shared"))
		}
	default:
		bad("Role", "must be master, slave, index or auto, got %q", s.Role)
	}
	if s.Role == messages.RoleIndex {
		if _, ok := s.Ordinal(); !ok {
			bad("Role", "index: no ordinal (a number after the last '-') in %s %q, $POD_NAME %q or $HOSTNAME %q",
				field.Ref("InstanceID"), s.InstanceID, os.Getenv("POD_NAME"), os.Getenv("HOSTNAME"))
		}
	}
	if _, err := s.MasterHostPort(); err != nil {
		bad("Master", "%v", err)
	}
	for _, p := range []struct{ path, v string }{{"Cluster", s.Cluster}, {"Region", s.Region}, {"Zone", s.Zone}} {
		if p.v != "" && !messages.ValidName(p.v) {
			bad(p.path, "%q is not a valid name (1-63 letters, digits, '.', '_', '-')", p.v)
		}
	}
	if len(s.Services) == 0 {
		bad("Services", "must name at least one of %v", messages.AllServices)
	}
	seen, unknown := map[string]bool{}, false
	for _, svc := range s.Services {
		if !slices.Contains(messages.AllServices, svc) {
			bad("Services", "unknown service %q (known: %v)", svc, messages.AllServices)
			unknown = true
		}
		if seen[svc] {
			bad("Services", "service %q given twice", svc)
		}
		seen[svc] = true
	}
	if !unknown && len(seen) < len(messages.AllServices) && !s.Shared {
		bad("Services", "the embedded store's single instance is its own master and must run every service %v: "+
			"work of a service nobody runs would wait for good", messages.AllServices)
	}
	if s.PublishInterval <= 0 {
		bad("PublishInterval", "must be positive, got %v", s.PublishInterval)
	}
	if err := s.Reconnect.Validate(); err != nil {
		errs = append(errs, field.Under("Reconnect", err))
	}
	return errs
}

// Ordinal is the StatefulSet ordinal of role index: from InstanceID, else
// $POD_NAME, else $HOSTNAME (the number after the last '-', see Ordinal).
func (s Settings) Ordinal() (int, bool) {
	for _, v := range []string{s.InstanceID, os.Getenv("POD_NAME"), os.Getenv("HOSTNAME")} {
		if n, err := Ordinal(v); v != "" && err == nil {
			return n, true
		}
	}
	return 0, false
}

// StartRole is the role the coordinator starts in: master, slave or auto.
// index becomes master on ordinal 0 and slave on any other; auto without
// an elector (elects false: a store of one instance) is master.
func (s Settings) StartRole(elects bool) string {
	role := s.Role
	if role == messages.RoleIndex {
		if ord, _ := s.Ordinal(); ord == 0 {
			role = messages.RoleMaster
		} else {
			role = messages.RoleSlave
		}
	}
	if role == messages.RoleAuto && !elects {
		role = messages.RoleMaster
	}
	return role
}

// MasterHostPort is the host:port a slave calls, from Master
// (https://host:port, or host:port); "" when Master is empty.
func (s Settings) MasterHostPort() (string, error) {
	if s.Master == "" {
		return "", nil
	}
	hostport := s.Master
	if u, err := url.Parse(s.Master); err == nil && u.Scheme != "" {
		if u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", fmt.Errorf("%q must be https://host:port", s.Master)
		}
		hostport = u.Host
	}
	// A host name or IP address and a port from 1 to 65535: split at the
	// last ':', "ht!tp://x" was host "ht!tp" and port "//x", called until
	// the slave gave up.
	host, port, err := net.SplitHostPort(hostport)
	if p, perr := strconv.Atoi(port); err != nil || !discovery.ValidHost(host) || perr != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%q must be https://host:port (a host name or IP address, a port from 1 to 65535)", s.Master)
	}
	return hostport, nil
}
