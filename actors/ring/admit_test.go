package ring

import (
	"strings"
	"testing"

	"github.com/switchboard-dev/switchboard/messages"
)

func masterDoc() messages.RingJoin {
	return messages.RingJoin{InstanceID: "ring-0", Node: "n1", Address: "ring-0:7000", Cluster: "us", Region: "east", Zone: "z1", Services: both}
}

func TestAdmit(t *testing.T) {
	ok := masterDoc()
	ok.InstanceID, ok.Address, ok.Zone = "ring-1", "ring-1:7000", "z2"
	for _, tc := range []struct {
		name    string
		change  func(j *messages.RingJoin)
		code    string
		mention []string
	}{
		{"admitted, zone differs", func(*messages.RingJoin) {}, "", nil},
		{"subset of services", func(j *messages.RingJoin) { j.Services = []string{messages.ServiceForward} }, "", nil},
		{"no id", func(j *messages.RingJoin) { j.InstanceID = "" }, CodeBadJoin, []string{"instance_id"}},
		{"no node", func(j *messages.RingJoin) { j.Node = "" }, CodeBadJoin, []string{"node"}},
		{"no address", func(j *messages.RingJoin) { j.Address = "" }, CodeBadJoin, []string{"address"}},
		{"no services", func(j *messages.RingJoin) { j.Services = nil }, CodeBadJoin, []string{"services"}},
		{"unknown service", func(j *messages.RingJoin) { j.Services = []string{"mail"} }, CodeBadJoin, []string{`"mail"`}},
		{"bad join before mismatch", func(j *messages.RingJoin) { j.Address = ""; j.Node = "n2" }, CodeBadJoin, nil},
		{"node", func(j *messages.RingJoin) { j.Node = "n2"; j.Cluster = "eu" }, CodeNodeMismatch, []string{`"n2"`, `"n1"`}},
		{"cluster", func(j *messages.RingJoin) { j.Cluster = "eu"; j.Region = "west" }, CodeClusterMismatch, []string{`cluster "eu" is not the master's cluster "us"`}},
		{"region", func(j *messages.RingJoin) { j.Region = "west" }, CodeRegionMismatch, []string{`"west"`, `"east"`}},
		{"services", func(j *messages.RingJoin) { j.Services = []string{messages.ServiceForward} }, CodeServicesNotSubset, []string{`"forward"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := masterDoc()
			if tc.code == CodeServicesNotSubset {
				m.Services = []string{messages.ServiceDelivery}
			}
			j := ok
			j.Services = append([]string(nil), ok.Services...)
			tc.change(&j)
			r := Admit(m, j)
			if tc.code == "" {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if r == nil || r.Code != tc.code {
				t.Fatalf("Admit = %v, want code %s", r, tc.code)
			}
			for _, s := range tc.mention {
				if !strings.Contains(r.Message, s) {
					t.Errorf("message %q does not mention %s", r.Message, s)
				}
			}
			var err error = r
			if !strings.HasPrefix(err.Error(), tc.code+": ") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}
