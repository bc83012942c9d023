package ring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-dev/switchboard/messages"
)

// Refusal codes of a join the master turns down.
const (
	// CodeBadJoin: the join document is incomplete or names an unknown
	// service.
	CodeBadJoin = messages.CodeRingBadJoin
	// CodeNodeMismatch: the joiner belongs to another node (site).
	CodeNodeMismatch = messages.CodeRingNodeMismatch
	// CodeClusterMismatch: the joiner is configured for another cluster.
	CodeClusterMismatch = messages.CodeRingCluster
	// CodeRegionMismatch: the joiner is configured for another region.
	CodeRegionMismatch = messages.CodeRingRegion
	// CodeServicesNotSubset: the joiner offers a service the master lacks
	// (the master must be able to stand in for every member's services).
	CodeServicesNotSubset = messages.CodeRingServices
	// CodeDuplicate: a member with the joiner's instance id is subscribed
	// from another address (two processes share one --instance-id).
	CodeDuplicate = messages.CodeRingDuplicate
)

// Refusal is why the master turned a join down: Code is one of the Code
// constants, Message a sentence for the operator.
type Refusal struct {
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// Admit decides whether the master (described by its own member document)
// admits j; nil means admitted. The checks run in the order of the Code
// constants and the first failing one is reported. Zone is informational
// and never refused.
func Admit(master messages.RingJoin, j messages.RingJoin) *Refusal {
	bad := func(format string, args ...any) *Refusal {
		return &Refusal{Code: CodeBadJoin, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case j.InstanceID == "":
		return bad("instance_id is empty")
	case j.Node == "":
		return bad("node is empty")
	case j.Address == "":
		return bad("address is empty")
	case len(j.Services) == 0:
		return bad("services is empty: a member must offer at least one of %s", strings.Join(messages.AllServices, ", "))
	}
	for _, s := range j.Services {
		if !slices.Contains(messages.AllServices, s) {
			return bad("service %q is not a ring service (%s)", s, strings.Join(messages.AllServices, ", "))
		}
	}
	if j.Node != master.Node {
		return &Refusal{Code: CodeNodeMismatch, Message: fmt.Sprintf("node %q is not the master's node %q", j.Node, master.Node)}
	}
	if j.Cluster != master.Cluster {
		return &Refusal{Code: CodeClusterMismatch, Message: fmt.Sprintf("cluster %q is not the master's cluster %q", j.Cluster, master.Cluster)}
	}
	if j.Region != master.Region {
		return &Refusal{Code: CodeRegionMismatch, Message: fmt.Sprintf("region %q is not the master's region %q", j.Region, master.Region)}
	}
	for _, s := range j.Services {
		if !slices.Contains(master.Services, s) {
			return &Refusal{Code: CodeServicesNotSubset, Message: fmt.Sprintf("service %q is not among the master's services %q", s, master.Services)}
		}
	}
	return nil
}
