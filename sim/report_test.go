package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestReportNamesEveryKindOfViolation: a report names messages of every
// kind of violation, however many of another kind come before them (in
// sorted order). It printed the first 30 lines of all: a run with 40
// disagreeing messages and one duplicated did not name the duplicated
// one ("... 11 more"), only counted it in the sim: line.
func TestReportNamesEveryKindOfViolation(t *testing.T) {
	var r Result
	for i := range 40 {
		r.Details = append(r.Details, fmt.Sprintf("disagreeing: m%02d acked at n2-f0 but forwarded at its origin n1", i))
	}
	r.Details = append(r.Details, "duplicated: x handed to a pull frontend again 1 time(s) after its ack was confirmed",
		"stuck: y forwarded at its origin n1 after the run")
	r.Disagreeing, r.Duplicated, r.Stuck = 40, 1, 1
	out := Report{Seed: 1, Nodes: 2, Result: r}.String()
	for _, want := range []string{"duplicated: x ", "stuck: y ", "disagreeing: m00 ", "more disagreeing"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "disagreeing: m"); n != maxDetails {
		t.Errorf("%d disagreeing lines, want %d (the bound of a kind)", n, maxDetails)
	}
}
