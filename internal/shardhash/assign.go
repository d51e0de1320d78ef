package shardhash

import (
	"encoding/binary"
	"hash/fnv"
)

// Score is the rendezvous score of member for range r: FNV-1a 64 of the
// member's name, mixed with r by a 64-bit finalizer (SplitMix64's), so
// that names differing in their last characters (web-0, web-1) still
// score independently; FNV-1a alone hardly changes its top bits there.
func Score(member string, r int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(r))
	h.Write(b[:])
	return mix(h.Sum64())
}

// mix is SplitMix64's finalizer: every input bit changes about half the
// output bits.
func mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// Bucket is the range, of n, that value (a namespace's name, or a
// cluster-scoped object's) falls in: mix(Sum(value)) mod n. The mix
// spreads names that differ only in their last characters (tenant-0001,
// tenant-0002), which equal ranges of Sum itself do not. n < 1 counts
// as 1.
//
//	r := shardhash.Bucket("payments-prod", 64) // 0 <= r < 64
func Bucket(value string, n int) int {
	n = max(n, 1)
	return int(mix(Sum(value)) % uint64(n))
}
