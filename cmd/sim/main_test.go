package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

var simLine = regexp.MustCompile(`(?m)^sim: seed=\d+ nodes=\d+ accepted=\d+ delivered=\d+ lost=\d+ duplicated=\d+ unexpected=\d+ misrouted=\d+ disagreeing=\d+( [a-z_]+=\d+)*\n\z`)

func TestRunEndsWithTheSimLine(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t, []string{"--nodes", "2", "--duration", "500ms", "--seed", "7", "--faults", "random"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !simLine.MatchString(out.String()) {
		t.Fatalf("the report does not end with the sim: line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "fault schedule (seed 7") {
		t.Fatalf("the report lacks the schedule:\n%s", out.String())
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{"--faults", "nope"}, {"--nodes", "x"}, {"extra"}, {"--instances", "0"}, {"--nodes", "1", "--instances", "3,1"}} {
		var out, errb bytes.Buffer
		if code := run(t, args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

var ringLine = regexp.MustCompile(`(?m)^sim: ring checks=\d+ overlaps=0 double_claims=0\nsim: seed=\d+ nodes=2 `)

func TestRunWithAMultiInstanceSite(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t, []string{"--nodes", "2", "--instances", "3", "--duration", "800ms", "--seed", "3", "--faults", "random"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if !ringLine.MatchString(out.String()) || !simLine.MatchString(out.String()) {
		t.Fatalf("the report lacks the ring line before the sim: line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "--instances 3") {
		t.Fatalf("the replay command lacks --instances:\n%s", out.String())
	}
}
