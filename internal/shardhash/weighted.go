package shardhash

import (
	"cmp"
	"slices"
)

// AssignWeighted returns, for each range r of len(weights), the member
// that owns it, balancing the members' summed weights (e.g. weights[r] =
// the number of namespaces in range r) rather than their range counts:
//
//	owners := shardhash.AssignWeighted(members, weights)
//
// Rendezvous hashing with bounded loads, by weight: (range, member) pairs
// are taken from the highest Score down, and a range goes to the first
// member whose load plus the range's weight stays within the cap,
// ⌈total/m⌉. A range that fits no member is left over; the leftovers go,
// heaviest first, each to the least loaded member. So:
//   - if nothing is left over, every load is within m-1 of the mean
//     (none exceeds the cap, and they sum to the total);
//   - otherwise the largest load exceeds the smallest by at most the
//     heaviest leftover's weight: within one range's weight.
//
// Ranges of weight 0 always fit: each goes to its top-scoring member, as
// plain rendezvous hashing. A member joining or leaving moves about 1/m
// of the weight, plus what the cap pushes on (see the tests for the
// measured figures). The answer depends only on the set of members and
// the weights: members that agree on both agree on the owners. Negative
// weights count as 0; duplicate members count once; with no members,
// every owner is "".
func AssignWeighted(members []string, weights []int) []string {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	n := len(weights)
	owners := make([]string, n)
	if len(ms) == 0 {
		return owners
	}
	w := make([]int, n)
	total := 0
	for r, x := range weights {
		w[r] = max(x, 0)
		total += w[r]
	}
	limit := (total + len(ms) - 1) / len(ms)
	load := make([]int, len(ms))
	taken := make([]bool, n)
	for _, p := range rankedPairs(ms, n) {
		fits := load[p.member]+w[p.rng] <= limit
		if taken[p.rng] || !fits {
			continue
		}
		taken[p.rng] = true
		load[p.member] += w[p.rng]
		owners[p.rng] = ms[p.member]
	}
	for _, r := range leftovers(taken, w) {
		j := leastLoaded(load)
		load[j] += w[r]
		owners[r] = ms[j]
	}
	return owners
}

// pair is one (range, member) pair and its rendezvous score.
type pair struct {
	score  uint64
	rng    int
	member int
}

// rankedPairs is every pair of n ranges and the members ms, highest
// score first (ties by range, then member: a total order).
func rankedPairs(ms []string, n int) []pair {
	pairs := make([]pair, 0, n*len(ms))
	for r := range n {
		for j, m := range ms {
			p := pair{score: Score(m, r), rng: r, member: j}
			pairs = append(pairs, p)
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(b.score, a.score),
			cmp.Compare(a.rng, b.rng),
			cmp.Compare(a.member, b.member))
	})
	return pairs
}

// leftovers is the ranges not taken, heaviest first (ties by range).
func leftovers(taken []bool, w []int) []int {
	var rs []int
	for r, t := range taken {
		if !t {
			rs = append(rs, r)
		}
	}
	slices.SortStableFunc(rs, func(a, b int) int {
		return cmp.Compare(w[b], w[a])
	})
	return rs
}

// leastLoaded is the index of the smallest load (the first of equals).
func leastLoaded(load []int) int {
	best := 0
	for j, l := range load {
		if l < load[best] {
			best = j
		}
	}
	return best
}
