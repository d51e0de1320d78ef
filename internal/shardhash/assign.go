package shardhash

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Assign returns, for each of n ranges (e.g. Split(n)), the member that
// owns it: rendezvous hashing with bounded loads. Every (range, member)
// pair has a score (Score); pairs are taken from the highest score down,
// and a range goes to the first member still under its share: ⌊n/m⌋
// ranges for m members, one more for the first n mod m members to reach
// it. So every member owns ⌊n/m⌋ or ⌈n/m⌉ ranges, and a member joining
// or leaving moves few ranges besides its own share (see the tests for the
// measured figures). The answer depends only on the set of members, not on
// their order, so members that agree on the set agree on the owners.
// Duplicate members count once; with no members, every owner is "".
func Assign(members []string, n int) []string {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	owners := make([]string, n)
	if len(ms) == 0 {
		return owners
	}
	pairs := rankedPairs(ms, n)
	// n%m members may own one range more than n/m.
	share := n / len(ms)
	extra := n % len(ms)
	load := make([]int, len(ms))
	taken := make([]bool, n)
	for _, p := range pairs {
		l := load[p.member]
		full := l > share || l == share && extra == 0
		if taken[p.rng] || full {
			continue
		}
		if l == share {
			extra--
		}
		taken[p.rng] = true
		load[p.member]++
		owners[p.rng] = ms[p.member]
	}
	return owners
}

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

// Owned returns the ranges of Split(len(owners)) whose owner is member.
func Owned(owners []string, member string) []Range {
	all := Split(len(owners))
	var rs []Range
	for i, o := range owners {
		if o == member {
			rs = append(rs, all[i])
		}
	}
	return rs
}

// Pick returns the member that owns key (e.g. a namespace's name) by plain
// rendezvous hashing: the member with the highest score of key, a strong
// mix of FNV-1a 64 over member and key, so that similar keys spread.
// Members that agree on the set agree on the owner; a member joining or
// leaving moves only the keys it gains or loses. "" with no members.
func Pick(members []string, key string) string {
	best := ""
	bestScore := uint64(0)
	for _, m := range members {
		s := mix(Sum(m + "\x00" + key))
		better := s > bestScore || s == bestScore && m > best
		if best == "" || better {
			best = m
			bestScore = s
		}
	}
	return best
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
