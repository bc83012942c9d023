package persistence

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/switchboard-dev/switchboard/messages"
)

// SignedRanges maps ranges of tokens to ranges of their stored form, the
// uint64's int64 bit pattern, in input order. Tokens from 2^63 up are stored
// as negative numbers, so a range on one side of 2^63 keeps its order and a
// range across it becomes two: [lo, MaxInt64] and [MinInt64, hi].
func SignedRanges(rs []TokenRange) [][2]int64 {
	out := make([][2]int64, 0, len(rs))
	for _, r := range rs {
		lo, hi := int64(r.Lo), int64(r.Hi)
		if (lo < 0) == (hi < 0) {
			out = append(out, [2]int64{lo, hi})
			continue
		}
		out = append(out, [2]int64{lo, math.MaxInt64}, [2]int64{math.MinInt64, hi})
	}
	return out
}

// Covered reports whether every range of want lies inside one range of
// owned (an empty want is covered).
func Covered(owned, want []TokenRange) bool {
	for _, w := range want {
		in := false
		for _, o := range owned {
			if o.Lo <= w.Lo && w.Hi <= o.Hi {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	return true
}

// SortOwners orders owners by service, then by range start.
func SortOwners(owners []RangeOwner) {
	sort.Slice(owners, func(i, j int) bool {
		if owners[i].Service != owners[j].Service {
			return owners[i].Service < owners[j].Service
		}
		return owners[i].Range.Lo < owners[j].Range.Lo
	})
}

// Validate reports every problem of an assignment to publish: an epoch of
// 0, an owner without a name, an unknown service, a range whose lo is above
// its hi, ranges of one service that overlap.
func (s RingState) Validate() error {
	var errs []error
	if s.Epoch == 0 {
		errs = append(errs, errors.New("ring: epoch must be positive"))
	}
	byService := map[string][]TokenRange{}
	for i, o := range s.Owners {
		switch {
		case o.Service != messages.ServiceDelivery && o.Service != messages.ServiceForward:
			errs = append(errs, fmt.Errorf("ring: owner %d: unknown service %q", i, o.Service))
		case o.Range.Lo > o.Range.Hi:
			errs = append(errs, fmt.Errorf("ring: owner %d: token range [%d, %d] has lo above hi", i, o.Range.Lo, o.Range.Hi))
		default:
			byService[o.Service] = append(byService[o.Service], o.Range)
		}
		if o.Owner == "" {
			errs = append(errs, fmt.Errorf("ring: owner %d: empty owner", i))
		}
	}
	for _, service := range messages.AllServices {
		rs := byService[service]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Lo < rs[j].Lo })
		for i := 1; i < len(rs); i++ {
			if rs[i].Lo <= rs[i-1].Hi {
				errs = append(errs, fmt.Errorf("ring: %s ranges [%d, %d] and [%d, %d] overlap",
					service, rs[i-1].Lo, rs[i-1].Hi, rs[i].Lo, rs[i].Hi))
			}
		}
	}
	return errors.Join(errs...)
}

// ValidatePublish reports what is wrong with PublishRing(prev, s) before
// the store looks at the stored epoch.
func ValidatePublish(prev uint64, s RingState) error {
	var errs []error
	if s.Epoch <= prev {
		errs = append(errs, fmt.Errorf("publish ring: epoch %d must be above the previous epoch %d", s.Epoch, prev))
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
