package messages

import "hash/fnv"

// TokenOf is the ring token of a message id: its 64-bit FNV-1a hash. It is
// stored with the message so that ring partitions can select their work by
// range without rehashing.
func TokenOf(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}
