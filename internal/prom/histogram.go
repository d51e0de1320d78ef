package prom

import (
	"math"
	"sort"
	"sync/atomic"
)

// Histogram counts observations into fixed buckets and sums them, as a
// Prometheus histogram. Observe takes no lock: a scrape racing with it may
// see the sum without the count or the other way round, but the count
// always equals the +Inf bucket. Make one with NewHistogram (the zero
// value has no buckets but +Inf); it is safe for concurrent use.
type Histogram struct {
	// upper are the buckets' upper bounds, ascending; +Inf is implied.
	upper []float64
	// counts[i] counts the observations in (upper[i-1], upper[i]]; the
	// last one, counts[len(upper)], those above every bound.
	counts []atomic.Uint64
	sum    atomicFloat
}

// NewHistogram returns a histogram with the given upper bounds, finite and
// strictly ascending, without +Inf. It keeps upper: do not change it.
func NewHistogram(upper []float64) *Histogram {
	counts := make([]atomic.Uint64, len(upper)+1)
	return &Histogram{upper: upper, counts: counts}
}

// Observe counts v in the first bucket whose bound is at least v (le is
// inclusive) and adds it to the sum.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v)
	h.counts[i].Add(1)
	h.sum.add(v)
}

// cumulative returns the count at or below each bound, then the total:
// the +Inf bucket.
func (h *Histogram) cumulative() []uint64 {
	out := make([]uint64, len(h.counts))
	var total uint64
	for i := range h.counts {
		total += h.counts[i].Load()
		out[i] = total
	}
	return out
}

// bound returns the upper bound of bucket i: +Inf for the last.
func (h *Histogram) bound(i int) float64 {
	if i < len(h.upper) {
		return h.upper[i]
	}
	return math.Inf(1)
}

// atomicFloat is a float64 that goroutines add to and set without a
// lock. The zero value is 0.
type atomicFloat struct {
	bits atomic.Uint64 // math.Float64bits of the value
}

// add adds v, retrying until no other add came between its read and
// its write.
func (f *atomicFloat) add(v float64) {
	for {
		old := f.bits.Load()
		sum := math.Float64frombits(old) + v
		if f.bits.CompareAndSwap(old, math.Float64bits(sum)) {
			return
		}
	}
}

func (f *atomicFloat) set(v float64) {
	f.bits.Store(math.Float64bits(v))
}

func (f *atomicFloat) load() float64 {
	return math.Float64frombits(f.bits.Load())
}
