// Package shardhash computes, on the client, what kube-apiserver's shard
// selector (KEP-5866, feature gate ShardedListAndWatch, alpha in 1.36)
// selects, and writes the selectors:
//
//	r := shardhash.Split(4)[1] // [0x4000000000000000, 0x8000000000000000)
//	sel := shardhash.Selector(shardhash.FieldUID, r)
//	// shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')
//	mine := r.Contains(shardhash.Sum(string(obj.UID)))
//
// The server (k8s.io/apimachinery/pkg/sharding at v0.36.3) hashes the field's
// value, the object's uid or namespace, with 64-bit FNV-1a over its bytes,
// and selects an object when start <= hash < end for one of the selector's
// ranges. Bounds are 0x-prefixed 16-digit lowercase hex; the end may also be
// 0x10000000000000000 (2^64), the top of the space. Sum and Range.Contains
// match it bit for bit (see the tests against a real kube-apiserver in
// package kctl).
package shardhash

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"
)

// The fields a shard selector may hash: no other is accepted by the server.
const (
	FieldUID       = "object.metadata.uid"
	FieldNamespace = "object.metadata.namespace"
)

// Sum is the server's hash of a field's value: 64-bit FNV-1a of its bytes.
func Sum(value string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(value))
	return h.Sum64()
}

// Range is the hashes h with Start <= h < End, where End 0 stands for 2^64,
// the top of the space. The zero Range is the whole space. A Range with
// End != 0 and End <= Start is empty and has no selector.
type Range struct {
	Start uint64
	End   uint64
}

// Point is the range holding hash h alone: the objects whose field hashes
// to exactly h (e.g. one namespace's).
func Point(h uint64) Range {
	return Range{Start: h, End: h + 1} // h = 2^64-1 wraps to End 0: 2^64
}

// Contains reports whether h is in r.
func (r Range) Contains(h uint64) bool {
	if h < r.Start {
		return false
	}
	return r.End == 0 || h < r.End
}

// Empty reports whether r holds no hash.
func (r Range) Empty() bool {
	return r.End != 0 && r.End <= r.Start
}

// String is r as the server's selector writes it: [0x…, 0x…).
func (r Range) String() string {
	return "[" + hex(r.Start) + ", " + endHex(r.End) + ")"
}

// Split cuts the space into n contiguous ranges of equal size (to within 1),
// in order: range i is [⌊i·2^64/n⌋, ⌊(i+1)·2^64/n⌋). n < 1 counts as 1.
func Split(n int) []Range {
	n = max(n, 1)
	rs := make([]Range, n)
	for i := range n {
		rs[i] = Range{Start: cut(i, n), End: cut(i+1, n)}
	}
	return rs
}

// cut is ⌊i·2^64/n⌋ for 0 <= i <= n, with 2^64 as 0.
func cut(i, n int) uint64 {
	if i == n {
		return 0
	}
	q, _ := bits.Div64(uint64(i), 0, uint64(n))
	return q
}

// Selector is the shard selector that selects the objects whose field
// (FieldUID or FieldNamespace) hashes into one of ranges: each range as
// shardRange(field, 'start', 'end'), joined with ||. Ranges are sorted and
// merged where they touch or overlap first, so the selector is as short as
// the set allows; empty ranges are dropped. It returns "" when nothing
// remains: the server rejects an empty selector, so select nothing by
// other means.
func Selector(field string, ranges ...Range) string {
	merged := Merge(ranges)
	parts := make([]string, len(merged))
	for i, r := range merged {
		parts[i] = fmt.Sprintf("shardRange(%s, '%s', '%s')",
			field, hex(r.Start), endHex(r.End))
	}
	return strings.Join(parts, " || ")
}

// hex writes a bound as the server requires: 0x and 16 lowercase digits.
func hex(v uint64) string {
	return fmt.Sprintf("0x%016x", v)
}

// endHex is hex for an end, where 0 stands for 2^64.
func endHex(v uint64) string {
	if v == 0 {
		return "0x10000000000000000"
	}
	return hex(v)
}
