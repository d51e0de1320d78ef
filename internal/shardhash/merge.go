package shardhash

import (
	"cmp"
	"slices"
)

// Merge returns the same set of hashes as ranges, as few ranges in order of
// Start that neither touch nor overlap; empty ranges are dropped. ranges is
// not changed.
func Merge(ranges []Range) []Range {
	rs := make([]Range, 0, len(ranges))
	for _, r := range ranges {
		if !r.Empty() {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b Range) int {
		return cmp.Compare(a.Start, b.Start)
	})
	out := rs[:0]
	for _, r := range rs {
		n := len(out)
		if n > 0 && reaches(out[n-1], r.Start) {
			out[n-1].End = later(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// reaches reports whether r ends at or after start (r's End touches it).
func reaches(r Range, start uint64) bool {
	return r.End == 0 || r.End >= start
}

// later is the later of two ends, 0 being 2^64.
func later(a, b uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}
