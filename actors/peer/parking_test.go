package peer

import (
	"errors"
	"strings"
	"testing"
)

// TestParking drives a Parking through events (start and end: a reason
// to park, the peer healthy or back; page: a page asked for comes up;
// more, last and fail: the page under way moved a full page, moved the
// last, or failed; retry: the parker's tick; idle: whether it may be
// forgotten) and checks what each says (want 1: ask for a page, run it,
// or idle).
func TestParking(t *testing.T) {
	storeDown := errors.New("store down")
	do := func(p *Parking, ev string) bool {
		switch ev {
		case "start":
			return p.Start()
		case "end":
			p.End()
			return false
		case "page":
			return p.Page()
		case "more":
			return p.Paged(true, nil)
		case "last":
			return p.Paged(false, nil)
		case "fail":
			return p.Paged(false, storeDown)
		case "retry":
			return p.Retry()
		case "idle":
			return p.Idle()
		}
		t.Fatalf("unknown event %q", ev)
		return false
	}
	cases := []struct {
		name string
		// noTick: the parker has no tick (the peers actor).
		noTick bool
		// steps are "event=want".
		steps string
	}{
		{"a new parking is idle and asks for nothing", false,
			"idle=1 page=0 last=0 retry=0 idle=1"},
		{"a start asks once until the parking ends", false,
			"start=1 idle=0 start=0 page=1 start=0 last=1 page=1 last=0 idle=1 page=0 start=1"},
		{"parking pages until a page comes back short", false,
			"start=1 page=1 more=1 page=1 more=1 page=1 last=0 idle=1 retry=0"},
		{"a page asked for runs alone", false,
			"start=1 page=1 page=0 last=1 page=1 last=0"},
		{"an end before its page runs nothing", false,
			"start=1 end=0 page=0 idle=1 start=1 page=1 last=0"},
		{"an end while a page runs ends the parking after it", false,
			"start=1 page=1 end=0 idle=0 more=0 idle=1 page=0 retry=0"},
		{"a parking begun again while a page runs pages after it, not beside it", false,
			"start=1 page=1 end=0 start=0 page=0 last=1 page=1 last=0 page=0"},
		{"a start while a full page runs pages after it once", false,
			"start=1 page=1 start=0 more=1 page=1 last=0 idle=1"},
		{"a parking begun again and ended while a page runs ends after it", false,
			"start=1 page=1 start=0 end=0 more=0 idle=1"},
		{"a failed page parks again at the next retry, once", false,
			"start=1 page=1 fail=0 idle=0 page=0 retry=1 retry=0 page=1 last=0 idle=1 retry=0"},
		{"a failed page is retried after a start that came first", false,
			"start=1 page=1 fail=0 start=1 retry=0 page=1 last=0 retry=0"},
		{"a page that fails after the parking began again parks at the next retry", false,
			"start=1 page=1 start=0 fail=0 page=0 retry=1 page=1 last=0"},
		{"a failed page that ran after an end is retried all the same", false,
			"start=1 page=1 end=0 fail=0 idle=0 retry=1 page=1 last=0"},
		{"no tick: a failed page is left for the next start", true,
			"start=1 page=1 fail=0 idle=1 retry=0 page=0 start=1"},
		{"no tick: a parking begun again while a page fails pages at once", true,
			"start=1 page=1 start=0 fail=1 page=1 last=0 idle=1"},
		{"no tick: a failed full page is left for the next start", true,
			"start=1 page=1 fail=0 idle=1"},
		{"no tick: a parking begun again and ended while a page fails ends", true,
			"start=1 page=1 start=0 end=0 fail=0 idle=1"},
		{"no tick: pages go on as with one", true,
			"start=1 page=1 more=1 page=1 start=0 last=1 page=1 end=0 more=0 idle=1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Parking{NoTick: tc.noTick}
			for i, s := range strings.Fields(tc.steps) {
				ev, want, _ := strings.Cut(s, "=")
				if got := do(&p, ev); got != (want == "1") {
					t.Fatalf("step %d (%s): said %v, want %v", i, ev, got, want == "1")
				}
			}
		})
	}
}
