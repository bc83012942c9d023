package smppout

import "sync/atomic"

// Refs hands out the 8-bit references of one frontend's concatenated
// messages (the reference octet of their concatenation header): one per
// long text sent, from a rolling counter. A handset reassembles the parts
// it receives by (sender, reference), so two long texts in flight to it
// must not share one: taken from a counter, two long texts the frontend
// sends one after the other share a reference only when 255 others went
// between them, the counter coming back to it every 256 (a reference derived from the message, as before, was
// shared by two texts 1 time in 256). One Refs serves every session and
// every client of a frontend on an instance (Clients gives it to each);
// it starts at a random value (NewRefs), so that a restart does not begin
// at the number of the last one. Safe for concurrent use.
type Refs struct {
	n atomic.Uint32
}

// NewRefs is a counter whose first reference is start.
func NewRefs(start byte) *Refs {
	r := &Refs{}
	r.n.Store(uint32(start))
	return r
}

// Next is the next reference.
func (r *Refs) Next() byte { return byte(r.n.Add(1) - 1) }
