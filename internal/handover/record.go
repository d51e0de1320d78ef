package handover

// How a member records its ranges on its Lease.

import (
	"strconv"
	"strings"
)

// Format writes ranges as a member's Lease records them (kctl's
// shard-ranges annotation): comma-separated indexes, e.g. "0,5,17".
func Format(rs []int) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ",")
}

// Parse reads what Format wrote: false unless every part is an index
// below n.
func Parse(v string, n int) ([]int, bool) {
	if v == "" {
		return nil, true
	}
	parts := strings.Split(v, ",")
	rs := make([]int, 0, len(parts))
	for _, p := range parts {
		r, err := strconv.Atoi(p)
		if err != nil || r < 0 || r >= n {
			return nil, false
		}
		rs = append(rs, r)
	}
	return rs, true
}

// MarkTaken sets taken[r] for each range r that a live member's record
// v (what Format wrote) holds. A record it cannot read counts as every
// range: a member never takes a range it cannot prove free.
func MarkTaken(taken []bool, v string) {
	rs, ok := Parse(v, len(taken))
	if !ok {
		for r := range taken {
			taken[r] = true
		}
		return
	}
	for _, r := range rs {
		taken[r] = true
	}
}
