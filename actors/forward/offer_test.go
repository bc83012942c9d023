package forward

import (
	"testing"
	"time"
)

func TestBoardOffer(t *testing.T) {
	type step struct {
		withdraw bool
		n        int
		idlePoll time.Duration
		want     bool
	}
	cases := []struct {
		name  string
		board bool
		steps []step
	}{
		{"no board: nothing to tell", false, []step{{n: 3}, {withdraw: true}}},
		{"own store: changes only", true, []step{
			{n: 0}, {n: 3, want: true}, {n: 3}, {n: 1, want: true}, {n: 0, want: true}, {n: 0}, {n: 2, want: true},
			{withdraw: true, want: true}, {withdraw: true}, {n: 0},
		}},
		{"nothing offered: nothing to withdraw", true, []step{{withdraw: true}}},
		{"shared store: never offers", true, []step{{n: 3, idlePoll: time.Second}, {withdraw: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewBoardOffer(tc.board)
			for i, s := range tc.steps {
				got := false
				if s.withdraw {
					got = o.Withdraw()
				} else {
					got = o.Set(s.n, s.idlePoll)
				}
				if got != s.want {
					t.Fatalf("step %d %+v: tell the board %v, want %v", i, s, got, s.want)
				}
			}
		})
	}
}
