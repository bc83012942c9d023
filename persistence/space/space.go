// Package space is the free space a node keeps on its store's file system,
// and the gate that refuses new work when it runs short.
//
// New work (submits, forwards from peers) makes the store grow; outcomes,
// status reports and the retention cleaner's deletes need a little room
// too, and they are what frees space. So new work is refused before the
// disk is full: when the free space on the data directory's file system is
// below the reserve (--min-free-space), and for a while after a write
// failed for lack of space (a full disk, a full Postgres volume, a file
// system mounted read-only). The reserve left is what lets the rest go on
// committing. The gate opens again by itself once there is room: the
// cleaner freed pages, or an operator added space.
//
//	open  --free < reserve--------------------->  full (reason: free space)
//	open  --a write failed for lack of space--->  full (reason: the error), for Hold
//	full  --free >= reserve + margin, Hold over->  open
package space

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Reserve is the free space to keep: Bytes, or Percent of the file
// system's size (whichever is set; both zero keeps none).
type Reserve struct {
	Bytes   int64
	Percent float64
}

// units are the suffixes ParseReserve knows, longest first.
var units = []struct {
	suffix string
	bytes  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseSize reads a byte size: a whole number with an optional unit (B,
// KB, MB, GB, TB, KiB, MiB, GiB, TiB).
func ParseSize(v string) (int64, error) {
	num, unit := strings.TrimSpace(v), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(rest), u.bytes
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || (unit > 1 && n > (1<<63-1)/unit) {
		return 0, errors.New("must be a size such as 512MiB, 2GiB or 1000000 (bytes)")
	}
	return n * unit, nil
}

// FormatSize prints a size in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for i := 3; i >= 0; i-- {
		u := units[i]
		if n >= u.bytes && n%u.bytes == 0 {
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// HumanSize prints a size for people: in the largest binary unit it
// reaches (B, KiB, MiB, GiB, TiB), whole when the unit divides it, else
// with one decimal, cut rather than rounded (a size below another never
// prints above it: 99.99MiB is 99.9MiB, not 100.0MiB). FormatSize prints
// one exactly, for flags.
func HumanSize(n int64) string {
	for i := 3; i >= 0; i-- {
		u := units[i]
		switch {
		case n < u.bytes:
			continue
		case n%u.bytes == 0:
			return strconv.FormatInt(n/u.bytes, 10) + u.suffix
		}
		return strconv.FormatInt(n/u.bytes, 10) + "." + strconv.FormatInt(n%u.bytes*10/u.bytes, 10) + u.suffix
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseReserve reads a reserve: a size (ParseSize) or a percentage of the
// file system ("5%", up to 90%).
func ParseReserve(v string) (Reserve, error) {
	if num, ok := strings.CutSuffix(strings.TrimSpace(v), "%"); ok {
		p, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(p >= 0 && p <= 90) { // NaN is neither
			return Reserve{}, errors.New("must be a size such as 256MiB or a percentage of the file system from 0% to 90%")
		}
		return Reserve{Percent: p}, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return Reserve{}, errors.New("must be a size such as 256MiB or a percentage of the file system such as 5%")
	}
	return Reserve{Bytes: n}, nil
}

// String is the reserve as ParseReserve reads it.
func (r Reserve) String() string {
	if r.Percent != 0 { // NaN and a negative one too: what Validate refuses
		return strconv.FormatFloat(r.Percent, 'g', -1, 64) + "%"
	}
	return FormatSize(r.Bytes)
}

// Need is the bytes to keep free on a file system of total bytes.
func (r Reserve) Need(total uint64) uint64 {
	if r.Percent > 0 {
		return uint64(float64(total) * r.Percent / 100)
	}
	return uint64(r.Bytes)
}

// Hold is how long the gate stays shut after a write failed for lack of
// space, before new work is tried again (5s: a full disk is rarely cured
// faster, and a tried write costs little).
const Hold = 5 * time.Second

// Gate decides whether new work may be taken. It is safe for concurrent
// use: the submit paths ask it, the free-space check and failed writes
// tell it.
type Gate struct {
	reserve Reserve

	mu      sync.Mutex
	low     string    // why the free space is short ("" when it is not)
	failed  string    // the last no-space failure
	until   time.Time // the failure shuts the gate until then
	shut    bool      // the state last reported by Changed
	free    uint64
	checked bool
}

// NewGate returns an open gate keeping reserve.
func NewGate(reserve Reserve) *Gate { return &Gate{reserve: reserve} }

// Observe records a check of the free space. The gate shuts below the
// reserve and opens again at the reserve plus a margin (a twentieth of it,
// at least 1 MiB), so that it does not flap at the edge.
func (g *Gate) Observe(free, total uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free, g.checked = free, true
	need := g.reserve.Need(total)
	margin := max(need/20, 1<<20)
	switch {
	case free < need:
		g.low = fmt.Sprintf("%s free on the store's file system, below the reserve of %s (--min-free-space %s)",
			HumanSize(int64(free)), HumanSize(int64(need)), g.reserve)
	case g.low != "" && free < need+margin:
		// Still short until past the margin: the reason gives the free
		// space now (a /readyz read while the cleaner frees space).
		g.low = fmt.Sprintf("%s free on the store's file system, not yet above the reserve of %s plus its margin of %s (--min-free-space %s)",
			HumanSize(int64(free)), HumanSize(int64(need)), HumanSize(int64(margin)), g.reserve)
	default:
		g.low = ""
	}
}

// Failed records a write that failed for lack of space at now: the gate
// stays shut for Hold (at most Hold from any later look: a clock stepped
// back does not make it longer).
func (g *Gate) Failed(now time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failed = "the store could not write: " + err.Error()
	g.until = now.Add(Hold)
}

// Shut reports whether new work is refused at now, and why.
func (g *Gate) Shut(now time.Time) (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shutLocked(now)
}

func (g *Gate) shutLocked(now time.Time) (bool, string) {
	if g.until.After(now.Add(Hold)) {
		// The clock was stepped back since the failure: the hold is
		// Hold from now, not the step's length more.
		g.until = now.Add(Hold)
	}
	if now.Before(g.until) {
		return true, g.failed
	}
	if g.low != "" {
		return true, g.low
	}
	return false, ""
}

// Changed reports whether the gate's state at now differs from the last
// one Changed reported (so that a transition is logged once), with the
// state and its reason.
func (g *Gate) Changed(now time.Time) (changed, shut bool, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	shut, why = g.shutLocked(now)
	changed, g.shut = shut != g.shut, shut
	return changed, shut, why
}

// Free is the free space last observed (ok false before the first check).
func (g *Gate) Free() (free uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.free, g.checked
}
