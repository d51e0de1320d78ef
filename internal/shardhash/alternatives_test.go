package shardhash

// The assignments measured against the one kctl uses (AssignWeighted):
// ranges of the whole hash space by count (Assign, Owned: for uid ranges)
// and plain rendezvous hashing of each key (Pick: for namespace points).
// balance_test.go and assign_test.go measure them; the production code
// needs none of them.

import "slices"

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
