package ring

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-dev/switchboard/field"
	"github.com/switchboard-dev/switchboard/messages"
)

func goodSettings() Settings {
	return Settings{
		Role: messages.RoleAuto, InstanceID: "a-1", Services: append([]string(nil), messages.AllServices...),
		PublishInterval: 30 * time.Second, Reconnect: DefaultReconnect(), Shared: true,
	}
}

func TestSettingsCheck(t *testing.T) {
	if errs := goodSettings().Check(); len(errs) != 0 {
		t.Fatalf("good settings: %v", errs)
	}
	for _, tc := range []struct {
		name  string
		set   func(*Settings)
		field string
		want  string
	}{
		{"unknown role", func(s *Settings) { s.Role = "leader" }, "Role", "must be master, slave, index or auto"},
		{"slave alone", func(s *Settings) { s.Role, s.Shared = messages.RoleSlave, false }, "Role", "slave needs Shared"},
		{"index alone", func(s *Settings) { s.Role, s.Shared = messages.RoleIndex, false }, "Role", "index needs Shared"},
		{"index without ordinal", func(s *Settings) { s.Role, s.InstanceID = messages.RoleIndex, "noordinal" }, "Role", "no ordinal"},
		{"master not https", func(s *Settings) { s.Master = "ftp://x:1" }, "Master", "must be https://host:port"},
		{"master without port", func(s *Settings) { s.Master = "x" }, "Master", "must be https://host:port"},
		{"bad zone", func(s *Settings) { s.Zone = "-" }, "Zone", "not a valid name"},
		{"no services", func(s *Settings) { s.Services = nil }, "Services", "at least one"},
		{"unknown service", func(s *Settings) { s.Services = []string{"x"} }, "Services", `unknown service "x"`},
		{"service twice", func(s *Settings) {
			s.Services = []string{messages.ServiceDelivery, messages.ServiceDelivery}
		}, "Services", "given twice"},
		{"one instance runs all", func(s *Settings) {
			s.Services, s.Shared = []string{messages.ServiceDelivery}, false
		}, "Services", "must run every service"},
		{"publish interval", func(s *Settings) { s.PublishInterval = 0 }, "PublishInterval", "must be positive"},
		{"reconnect", func(s *Settings) { s.Reconnect.MaxAttempts = 0 }, "Reconnect.MaxAttempts", "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := goodSettings()
			tc.set(&s)
			t.Setenv("POD_NAME", "")
			t.Setenv("HOSTNAME", "")
			errs := s.Check()
			found := false
			for _, err := range errs {
				var fe *field.Error
				if errors.As(err, &fe) && fe.Field == tc.field && strings.Contains(err.Error(), tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("Check() = %v, want an error on %s containing %q", errs, tc.field, tc.want)
			}
		})
	}
}

func TestSettingsStartRole(t *testing.T) {
	t.Setenv("POD_NAME", "")
	t.Setenv("HOSTNAME", "")
	for _, tc := range []struct {
		role, id string
		elects   bool
		want     string
	}{
		{messages.RoleMaster, "a", true, messages.RoleMaster},
		{messages.RoleSlave, "a", true, messages.RoleSlave},
		{messages.RoleAuto, "a", true, messages.RoleAuto},
		{messages.RoleAuto, "a", false, messages.RoleMaster},
		{messages.RoleIndex, "ring-0", true, messages.RoleMaster},
		{messages.RoleIndex, "ring-2.ring-headless", true, messages.RoleSlave},
	} {
		s := goodSettings()
		s.Role, s.InstanceID = tc.role, tc.id
		if got := s.StartRole(tc.elects); got != tc.want {
			t.Errorf("%s of %q (elects %v): StartRole = %q, want %q", tc.role, tc.id, tc.elects, got, tc.want)
		}
	}
	t.Setenv("POD_NAME", "sb-3")
	s := goodSettings()
	s.Role, s.InstanceID = messages.RoleIndex, "noordinal"
	if n, ok := s.Ordinal(); !ok || n != 3 {
		t.Errorf("Ordinal from $POD_NAME = %d, %v; want 3", n, ok)
	}
}

func TestSettingsMasterHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "https://m:8443": "m:8443", "https://m:8443/": "m:8443", "10.0.0.1:9443": "10.0.0.1:9443",
	} {
		s := Settings{Master: in}
		if got, err := s.MasterHostPort(); err != nil || got != want {
			t.Errorf("MasterHostPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"http://m:1", "https://m:1/path", "https://", "m",
		// Not a URL, nor host:port: split at the last ':' they were host
		// "ht!tp" and port "//x", and the slave called that until it gave up.
		"ht!tp://x", "m:99999", "m:0", "m:http", "https://:8443", "bad host:1"} {
		if _, err := (Settings{Master: in}).MasterHostPort(); err == nil {
			t.Errorf("MasterHostPort(%q): no error", in)
		}
	}
}
